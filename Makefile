# cardbench: the two commands of the README, and what they stand on.
#   make run   installs what is missing, builds, and runs cardbenchd (demo mode) with a sale through it
#   make test  installs what is missing, builds, and runs every test (with the pyemv cross-check)

SWIFT ?= swift
VENV ?= .venv
PYTHON ?= python3
BENCH_SECONDS ?= 2
BENCH_LEDGER_ROWS ?= 1000000
FUZZ_SECONDS ?= 10
# Debian packages the build needs: libcrypto's headers (DES), SQLite, libudev, libpcsclite, pkg-config.
APT_PACKAGES := libssl-dev libsqlite3-dev libudev-dev libpcsclite-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The PC/SC interop test: Debian's pcscd with vsmartcard's vpcd, and pyscard seen through a venv
# made from Debian's own python3 (a venv of another python cannot see python3-pyscard).
INTEROP_APT := pcscd vsmartcard-vpcd python3-pyscard python3-venv
INTEROP_VENV ?= .venv-interop

.PHONY: all deps venv build run tools test unit-test interop console scenarios bench fuzz deb deb-test clean

all: build

## deps: install the Debian packages that are missing (and only those)
deps:
	@command -v $(SWIFT) >/dev/null || { echo "cardbench needs a Swift 6 toolchain on PATH (https://www.swift.org/install/linux/debian/12/)"; exit 1; }
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; done; \
	$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

## venv: a Python venv with pyemv, the oracle of the cross-check and the floor of bench crypto
venv: deps
	@$(VENV)/bin/python -c 'import pyemv, onlinepayments.sdk, jwcrypto, selenium, iso8583, yaml' 2>/dev/null || { \
		echo "creating $(VENV) with pyemv, the Worldline SDK, jwcrypto, selenium and pyiso8583"; \
		$(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q --disable-pip-version-check -r Tests/Oracle/requirements.txt; }

build: deps
	$(SWIFT) build

## run: build, start cardbenchd on its embedded default (./.cardbench, terminal bench1, a virtual
## reader) in demo mode, show a Viva sale through it, then keep it running until Ctrl-C
DEMO_URL := vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=SG23323424EXS3&appId=com.example.myapp&action=sale&amount=1200&tipAmount=200&withInstallments=false&clientTransactionId=demo-
run: build
	@bin=$$($(SWIFT) build --show-bin-path); url="$(DEMO_URL)$$(date +%s)"; \
	$$bin/cardbenchd --demo & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid' INT TERM EXIT; \
	for i in $$(seq 1 100); do [ -S .cardbench/run/control.sock ] && $$bin/cardbench terminals >/dev/null 2>&1 && break; sleep 0.1; done; \
	echo; echo "\$$ cardbench open '$$url'"; \
	$$bin/cardbench open "$$url"; \
	echo; echo '$$ cardbench tx list --limit 3'; $$bin/cardbench tx list --limit 3; \
	echo; echo "cardbenchd is running (demo mode): try 'cardbench open <url>', 'cardbench tx show <id>', 'cardbench events' from $$bin; Ctrl-C stops it"; \
	wait $$pid

## scenarios: the scenario library against a real cardbenchd started with no configuration (on a
## temporary state directory): the run makes the terminals its scenarios declare and switches the
## clock to manual (scenarios.setup), with a JUnit report in scenarios-junit.xml; `make test` runs
## the same library in process. JOBS=N runs N scenarios at once.
SCENARIO_DIR := $(shell echo $${TMPDIR:-/tmp})/cardbench-scenarios
JOBS ?= 2
scenarios: build
	@bin=$$($(SWIFT) build --show-bin-path); rm -rf $(SCENARIO_DIR); mkdir -p $(SCENARIO_DIR); \
	$$bin/cardbenchd --state-directory $(SCENARIO_DIR)/state --runtime-directory $(SCENARIO_DIR)/run \
		2> $(SCENARIO_DIR)/cardbenchd.log & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid' INT TERM EXIT; \
	for i in $$(seq 1 100); do [ -S $(SCENARIO_DIR)/run/control.sock ] && break; sleep 0.1; done; \
	$$bin/cardbench scenario run Scenarios --socket $(SCENARIO_DIR)/run/control.sock --jobs $(JOBS) --junit scenarios-junit.xml

## tools: the offline tools on examples (an in-process sale, the EMV tools)
tools: build
	@echo '$$ cardbench sale --card Scenarios/cards/visa-credit-cvn10.yaml --amount 100.00'
	@$(SWIFT) run -q cardbench sale --card Scenarios/cards/visa-credit-cvn10.yaml --amount 100.00
	@echo
	@echo '$$ cardbench emv tlv 6F1A840E315041592E5359532E4444463031A5088801025F2D02656E'
	@$(SWIFT) run -q cardbench emv tlv 6F1A840E315041592E5359532E4444463031A5088801025F2D02656E
	@echo
	@echo '$$ cardbench emv arqc --cvn 18 --imk 0123456789ABCDEFFEDCBA9876543210 --pan 1234567890123456 --psn 00 --iad 06011203A0B800 --tag ...'
	@$(SWIFT) run -q cardbench emv arqc --cvn 18 --imk 0123456789ABCDEFFEDCBA9876543210 --pan 1234567890123456 --psn 00 \
		--iad 06011203A0B800 --tag 9F02=000000004000 --tag 9F03=000000000000 --tag 9F1A=0124 --tag 95=8000048000 \
		--tag 5F2A=0124 --tag 9A=191105 --tag 9C=01 --tag 9F37=52BF4585 --tag 82=1800 --tag 9F36=001C
	@echo
	@echo '$$ cardbench emv arpc --cvn 18 ... --arqc 7A788EA6B8A3E733 --csu 00000000 --tag 9F36=001C'
	@$(SWIFT) run -q cardbench emv arpc --cvn 18 --imk 0123456789ABCDEFFEDCBA9876543210 --pan 1234567890123456 --psn 00 \
		--arqc 7A788EA6B8A3E733 --csu 00000000 --tag 9F36=001C
	@echo
	@echo '$$ cardbench emv atr 3B6800008066A2060201320E'
	@$(SWIFT) run -q cardbench emv atr 3B6800008066A2060201320E
	@echo
	@echo '$$ cardbench emv pinblock --format 0 --pin 1234 --pan 4111111111111111'
	@$(SWIFT) run -q cardbench emv pinblock --format 0 --pin 1234 --pan 4111111111111111

## test: every test — the Swift suites (with 700 random cases against pyemv), PC/SC interop, the console in a browser
test: unit-test interop console

## the daemon tests check the systemd unit with systemd-analyze and systemd-sysusers, run the
## daemon under systemd's MemoryDenyWriteExecute filter through libseccomp, and (as root) try the
## udev rules with udevadm and follow a marked tty through a systemd-udevd they start; the access
## tests make a TLS certificate with openssl; the PC/SC tests run private pcscds with vsmartcard's vpcd
## (as root) and must not skip (CARDBENCH_REQUIRE_PCSC)
TEST_APT := systemd libseccomp2 udev openssl pcscd vsmartcard-vpcd

unit-test: deps venv
	@missing=""; \
	for p in $(TEST_APT); do dpkg -s $$p 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	$(SWIFT) build --build-tests
	CARDBENCH_REQUIRE_PCSC=$$([ "$$(id -u)" = 0 ] && echo 1 || echo 0) CARDBENCH_PYTHON=$(abspath $(VENV))/bin/python $(SWIFT) test --skip-build

## console: the bench console in a real browser — Debian's chromium, headless, driven by selenium
## through Debian's chromedriver — against a real cardbenchd (docs/console.md); a screenshot of
## each page lands in $(CI_ARTIFACTS)/console
CONSOLE_APT := chromium chromium-driver
CI_ARTIFACTS ?= ci-artifacts
console: deps venv
	@missing=""; \
	for p in $(CONSOLE_APT); do dpkg -s $$p 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	$(SWIFT) build --product cardbenchd
	$(VENV)/bin/python Tests/Console/console_test.py --cardbenchd "$$($(SWIFT) build --show-bin-path)/cardbenchd" \
		--scenarios Scenarios --screenshots $(CI_ARTIFACTS)/console
	$(VENV)/bin/python Tests/Console/pages_test.py --cardbenchd "$$($(SWIFT) build --show-bin-path)/cardbenchd" \
		--screenshots $(CI_ARTIFACTS)/console

## interop: a virtual card behind real pcscd + vpcd, driven by pyscard, its ARQC checked by pyemv
interop: deps
	@missing=""; \
	for p in $(INTEROP_APT); do dpkg -s $$p 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@$(INTEROP_VENV)/bin/python -c 'import smartcard, pyemv' 2>/dev/null || { \
		echo "creating $(INTEROP_VENV) (Debian python3 with system site packages, pyemv)"; \
		rm -rf $(INTEROP_VENV); /usr/bin/python3 -m venv --system-site-packages $(INTEROP_VENV) && \
		$(INTEROP_VENV)/bin/pip install -q --disable-pip-version-check -r Tests/Oracle/requirements.txt; }
	$(SWIFT) build --product cardbench
	$(SUDO) env PROFILE=Scenarios/cards/visa-credit-cvn10.yaml PYTHON=$(INTEROP_VENV)/bin/python \
		Tests/Interop/run.sh --profile-pan 4761739001010010 --pin 1234 --imk 0123456789ABCDEFFEDCBA9876543210 --cvn 10 --psn 01
	$(SUDO) env PROFILE=Scenarios/cards/mastercard-credit-cvn16.yaml PYTHON=$(INTEROP_VENV)/bin/python \
		Tests/Interop/run.sh --profile-pan 5413330089604004 --pin 1234 --imk FEDCBA98765432100123456789ABCDEF --cvn 16 --psn 00
	@# Offline data authentication (docs/oda.md): the oracle recovers every certificate and checks every
	@# signature of cardbench's cards through pcscd (SDA+DDA+CDA, DDA over T=0, SDA alone), and finds the
	@# spoilt ones on the check that is spoilt; then makes cards of its own that cardbench's kernel must
	@# authenticate, and reject once spoilt.
	$(SUDO) env PROFILE=Scenarios/cards/mastercard-credit-cvn16.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/oda_interop.py \
		Tests/Interop/run.sh --aid A0000000041010 --capk Scenarios/ca/capk.yaml --pin 1234
	$(SUDO) env PROFILE=Scenarios/cards/visa-t0-get-response.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/oda_interop.py \
		Tests/Interop/run.sh --aid A0000000031010 --capk Scenarios/ca/capk.yaml --pin 1234
	$(SUDO) env PROFILE=Scenarios/cards/oda-visa-sda.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/oda_interop.py \
		Tests/Interop/run.sh --aid A0000000031010 --capk Scenarios/ca/capk.yaml --pin 1234
	$(SUDO) env PROFILE=Scenarios/cards/oda-tampered-record.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/oda_interop.py \
		Tests/Interop/run.sh --aid A0000000031010 --capk Scenarios/ca/capk.yaml --pin 1234 --expect-failure ssad-hash
	$(SUDO) env PROFILE=Scenarios/cards/oda-cda-wrong-icc-key.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/oda_interop.py \
		Tests/Interop/run.sh --aid A0000000041010 --capk Scenarios/ca/capk.yaml --pin 1234 --expect-failure cda-trailer
	$(INTEROP_VENV)/bin/python Tests/Interop/oda_reverse.py
	@# Taps (docs/contactless.md): cards answering with a PC/SC part 3 ATR, connected T=1, PPSE,
	@# Kernel 3 qVSDC and Kernel 2 cryptograms checked by pyemv.
	$(SUDO) env PROFILE=Scenarios/cards/visa-debit-contactless.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/contactless_interop.py CARD_VERB=tap \
		Tests/Interop/run.sh --profile-pan 4761739001010119 --imk 0123456789ABCDEFFEDCBA9876543210 --cvn 18 --psn 01
	$(SUDO) env PROFILE=Scenarios/cards/visa-credit-qvsdc-fdda.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/contactless_interop.py CARD_VERB=tap \
		Tests/Interop/run.sh --profile-pan 4761739001010127 --imk 0123456789ABCDEFFEDCBA9876543210 --cvn 18 --psn 00
	$(SUDO) env PROFILE=Scenarios/cards/mastercard-paypass-cvn16.yaml PYTHON=$(INTEROP_VENV)/bin/python TERMINAL=Tests/Interop/contactless_interop.py CARD_VERB=tap \
		Tests/Interop/run.sh --profile-pan 5413330089604111 --imk FEDCBA98765432100123456789ABCDEF --cvn 16 --psn 00
	@echo "interop: 11 passed, 0 failed"

## bench: release build, then bench crypto (against pyemv and the DES floor), bench card (against a
## socket ping-pong), bench ledger (lookups at a million rows against a primary-key lookup), bench
## sale (through the daemon, beside a durable commit and a do-nothing request; one terminal, 32,
## and 100,000 sales for memory growth), bench serial (over a pty, beside the wire time at 9600 baud)
## bench scenarios (the library in process and against a daemon with no configuration, and 10,000
## generated scenarios, beside an empty scenario's floor) and bench pcsc (through a private pcscd +
## vpcd, beside SCardTransmit alone and the virtual socket)
bench: deps venv
	$(SWIFT) build -c release --product cardbench
	$(SWIFT) build -c release --product cardbenchd
	CARDBENCH_PYTHON=$(abspath $(VENV))/bin/python .build/release/cardbench bench crypto --seconds $(BENCH_SECONDS)
	.build/release/cardbench bench card --seconds $(BENCH_SECONDS)
	.build/release/cardbench bench ledger --rows $(BENCH_LEDGER_ROWS)
	.build/release/cardbench bench sale --terminals 1 --count 2000 --floor-commits 2000
	.build/release/cardbench bench sale --terminals 32 --count 6400 --floor-commits 2000
	.build/release/cardbench bench sale --terminals 32 --count 6400 --socket-cards
	.build/release/cardbench bench sale --terminals 4 --count 100000
	.build/release/cardbench bench iso8583 --connections 1000 --depth 4 --count 120000
	.build/release/cardbench bench worldline --count 100000
	.build/release/cardbench bench citcon --count 100000
	.build/release/cardbench bench serial --seconds $(BENCH_SECONDS)
	.build/release/cardbench bench serial --seconds $(BENCH_SECONDS) --size 16
	.build/release/cardbench bench serial --seconds $(BENCH_SECONDS) --workload sale
	.build/release/cardbench bench oda --seconds $(BENCH_SECONDS)
	.build/release/cardbench bench scenarios Scenarios --jobs 2
	.build/release/cardbench bench scenarios --generated 10000 --jobs 2
	@d=$$(mktemp -d); .build/release/cardbenchd --state-directory $$d/state --runtime-directory $$d/run 2> $$d/cardbenchd.log & pid=$$!; \
	for i in $$(seq 1 100); do [ -S $$d/run/control.sock ] && break; sleep 0.1; done; \
	.build/release/cardbench bench scenarios Scenarios --socket $$d/run/control.sock --jobs 2; status=$$?; \
	kill $$pid; wait $$pid; rm -rf $$d; exit $$status
	$(SUDO) .build/release/cardbench bench pcsc --seconds $(BENCH_SECONDS)

## fuzz: builds the libFuzzer targets (docs/fuzzing.md), then runs each for FUZZ_SECONDS on a copy
## of its seed corpus; fails on any crash or property failure
fuzz: deps
	SWIFT=$(SWIFT) Fuzz/build.sh
	Fuzz/run.sh $(FUZZ_SECONDS)

## deb: the Debian package cardbench_<version>_<arch>.deb in this directory (packaging/deb.sh: a
## release build with the Swift runtime linked in, staged and packed by dpkg-deb), checked by lintian
DEB_APT := dpkg-dev binutils lintian
deb: deps
	@missing=""; \
	for p in $(DEB_APT); do dpkg -s $$p 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	packaging/deb.sh .
	packaging/lintian.sh cardbench_*.deb

## deb-test: install the package on this machine (root), use it as a bench would (a demo sale from
## /tmp, man pages, completions, the daemon as the unit runs it with a member and a non-member of
## the cardbench group), then purge it and check nothing is left (packaging/install-test.sh)
deb-test: deb
	$(SUDO) packaging/install-test.sh cardbench_*.deb

clean:
	rm -rf .build .build-deb $(VENV) $(INTEROP_VENV) cardbench_*.deb
