#!/usr/bin/env bash
# The package in a clean Debian root (debootstrap: it installs with only its Depends, sells, and
# purges), then as a bench uses it, on this machine (root; CI's fresh machine): install it with apt,
# run a demo sale from /tmp with no files, read the man pages, complete a command, run the daemon
# as the unit runs it (user cardbench, its runtime and state directories, UMask=0007) and use its
# control socket as a member and as a non-member of the cardbench group; then purge it and check
# that nothing it installed or made is left. Without systemd as PID 1 (a container, CI) the unit
# itself cannot start here: its sandbox is tested by Tests/DaemonTests/SystemdUnitTests.
#   packaging/install-test.sh cardbench_VERSION_ARCH.deb
set -euo pipefail
deb=$(realpath "${1:?usage: packaging/install-test.sh cardbench_VERSION_ARCH.deb}")
[ "$(id -u)" = 0 ] || { echo "install-test.sh: run as root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
fail() { echo "install-test: FAILED: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }
URL='vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=com.example.app&action=sale&amount=1200&clientTransactionId=install-'

# What the test needs besides the package: man-db to read pages, bash-completion's loader, and
# xdg-utils with desktop-file-utils (whose trigger registers the package's scheme handler).
for p in man-db bash-completion xdg-utils desktop-file-utils debootstrap; do
    grep -q '^Status: install ok installed' <<< "$(dpkg -s "$p" 2>/dev/null)" || { apt-get update -qq; apt-get install -y -qq "$p" >/dev/null; }
done
if dpkg -s cardbench >/dev/null 2>&1; then apt-get purge -y -qq cardbench >/dev/null; fi
# A cardbench left by an earlier run (purged, user kept) must not hide a missing step.

step "a clean root: Debian's minimal base (debootstrap --variant=minbase), the package and only what it Depends on"
. /etc/os-release
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p; s/^deb \(http[^ ]*debian\)\/* .*/\1/p' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | sed -n 1p || true)
clean=$(mktemp -d /tmp/cardbench-root.XXXXXX)
debootstrap --variant=minbase "${VERSION_CODENAME:-bookworm}" "$clean" "${mirror:-http://deb.debian.org/debian}" > "$clean.log" 2>&1 ||
    { tail -5 "$clean.log"; rm -rf "$clean" "$clean.log"; fail "debootstrap"; }
cp "$deb" "$clean/tmp/cardbench.deb"
cat > "$clean/tmp/inside.sh" <<'INSIDE'
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq /tmp/cardbench.deb > /tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }
echo "installed in the clean root with: $(dpkg-query -W -f='${Depends}' cardbench)"
mkdir /tmp/w && cd /tmp/w
cardbenchd --demo --http-port off > d.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S .cardbench/run/control.sock ] && break; sleep 0.1; done
reply=$(cardbench open "$1") || { cat d.log; exit 1; }
echo "$reply"
case "$reply" in *status=success*) ;; *) cat d.log; exit 1 ;; esac
kill "$pid"; wait "$pid" || true
cd /
# (apt's "Can not write log" without /dev/pts in the chroot is noise: the checks below decide.)
apt-get purge -y -qq cardbench > /tmp/purge.log 2>&1 || { cat /tmp/purge.log; exit 1; }
for f in /usr/bin/cardbench /usr/bin/cardbenchd /etc/cardbench /var/lib/cardbench /usr/share/cardbench; do
    if [ -e "$f" ]; then echo "$f is left after the purge"; exit 1; fi
done
echo "purged in the clean root"
INSIDE
unshare --mount --propagation private sh -c 'mount -t proc proc "$1/proc" && exec chroot "$1" /bin/sh /tmp/inside.sh "$2"' sh "$clean" "${URL}clean-root" ||
    { rm -rf "$clean" "$clean.log"; fail "the package in a clean root"; }
rm -rf "$clean" "$clean.log"

step "install $(basename "$deb") ($(du -h "$deb" | cut -f1)) on this machine"
apt-get install -y -qq "$deb" >/dev/null
grep -q '^Status: install ok installed' <<< "$(dpkg -s cardbench)" || fail "not installed"
installed=$(dpkg -L cardbench)
for f in /usr/bin/cardbench /usr/bin/cardbenchd /usr/lib/systemd/system/cardbenchd.service /usr/lib/sysusers.d/cardbench.conf \
         /usr/lib/tmpfiles.d/cardbench.conf /usr/lib/udev/rules.d/70-cardbench.rules /etc/cardbench/cardbenchd.yaml \
         /usr/share/cardbench/cards/visa-credit-cvn10.yaml /usr/share/cardbench/ca/capk.yaml /usr/share/applications/cardbench-open.desktop \
         /usr/share/man/man1/cardbench.1.gz /usr/share/man/man8/cardbenchd.8.gz /usr/share/man/man5/cardbenchd.yaml.5.gz \
         /usr/share/bash-completion/completions/cardbench /usr/share/zsh/vendor-completions/_cardbench \
         /usr/share/fish/vendor_completions.d/cardbench.fish /usr/share/doc/cardbench/copyright \
         /usr/share/cardbench/observability/cardbench-dashboard.json; do
    grep -qxF -- "$f" <<< "$installed" || fail "$f is not in the package"
    [ -e "$f" ] || fail "$f is not on disk"
done
grep -qx /etc/cardbench/cardbenchd.yaml /var/lib/dpkg/info/cardbench.conffiles || fail "the configuration is not a conffile"
grep -q ':/var/lib/cardbench:/usr/sbin/nologin$' <<< "$(getent passwd cardbench)" || fail "no system user cardbench"
grep -qx dialout <<< "$(id -nG cardbench | tr ' ' '\n')" || fail "cardbench is not in dialout"
[ "$(stat -c '%U:%G %a' /var/lib/cardbench)" = "cardbench:cardbench 750" ] || fail "/var/lib/cardbench: $(stat -c '%U:%G %a' /var/lib/cardbench)"
for b in cardbench cardbenchd; do
    v=$("$b" --version); echo "$b --version: $v"
    [ "$(dpkg-query -W -f='${Version}' cardbench)" = "$v" ] || fail "$b --version $v is not the package's version"
done
echo "installed: $(dpkg-query -W -f='${Installed-Size}' cardbench) KiB; depends: $(dpkg-query -W -f='${Depends}' cardbench)"
for unit in cardbenchd.service cardbenchd.socket; do
    if [ -e "/etc/systemd/system/multi-user.target.wants/$unit" ] || [ -e "/etc/systemd/system/sockets.target.wants/$unit" ]; then
        fail "the package enabled $unit"
    fi
done

step "cardbenchd --demo and cardbench from an empty directory (the embedded default)"
work=$(mktemp -d /tmp/cardbench-install.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work" "$work.unit.log"; }
trap cleanup EXIT
cd "$work"
start=$(date +%s%N)
CARDBENCH_SCENARIOS_DIRECTORY=/usr/share/cardbench/scenarios cardbenchd --demo --http-port 0 > demo.log 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -S .cardbench/run/control.sock ] && [ -s .cardbench/run/http.port ] && break; sleep 0.05; done
[ -S .cardbench/run/control.sock ] || { cat demo.log; fail "cardbenchd --demo did not start from $work"; }
echo "control socket after $(( ($(date +%s%N) - start) / 1000000 )) ms"
reply=$(cardbench open "${URL}demo")
echo "$reply"
grep -q '^mycallbackscheme://result?status=success&' <<< "$reply" || fail "the demo sale did not succeed"
# The bench console, compiled into the release build: the page without the token, its data with it.
link=$(cardbench console) || fail "cardbench console"
grep -Eq '^http://127\.0\.0\.1:[0-9]+/console/#token=[0-9a-f]{64}$' <<< "$link" || fail "cardbench console printed $link"
python3 - "$link" <<'PY' || fail "the installed daemon's console"
import json, sys, urllib.request
base, token = sys.argv[1].split("/console/#token=")
page = urllib.request.urlopen(base + "/console/")
assert page.headers["Content-Type"].startswith("text/html") and b"/console/console.js" in page.read(), "the page"
assert urllib.request.urlopen(base + "/console/console.js").status == 200, "a module"
request = urllib.request.Request(base + "/v1/scenarios", headers={"Authorization": "Bearer " + token})
listing = json.load(urllib.request.urlopen(request))
assert len(listing["files"]) > 200, listing["directory"]
print("console: page and modules served;", len(listing["files"]), "scenarios in", listing["directory"])
PY
kill "${pids[0]}"; wait "${pids[0]}" || true
sale=$(cardbench sale --amount 5.00 --ledger "$work/sale.sqlite") || fail "cardbench sale from $work: $sale"
grep -q 'APPROVED' <<< "$sale" || fail "cardbench sale from $work: $sale"
grep -q '^visa-credit-cvn10	' <<< "$(cardbench card list)" || fail "cardbench card list"
# The installed scenario library, which finds its cards in /usr/share/cardbench/cards.
scenarios=$(cardbench scenario run /usr/share/cardbench/scenarios 2>&1) || { tail -20 <<< "$scenarios"; fail "the installed scenario library"; }
tail -1 <<< "$scenarios"
cd /

step "man pages"
for page in cardbench.1 cardbenchd.8 cardbenchd.yaml.5; do
    name=${page%.*}; section=${page##*.}
    text=$(MANWIDTH=100 man -P cat "$section" "$name" 2>/dev/null) || fail "man $section $name"
    sed -n '1,4p' <<< "$text"
    grep -q "^NAME" <<< "$text" || fail "man $section $name has no NAME"
done
grep -q 'callbacks.command' <<< "$(MANWIDTH=100 man -P cat 5 cardbenchd.yaml)" || fail "cardbenchd.yaml(5) does not describe callbacks.command"

step "bash completion"
completions=$(bash -c 'source /usr/share/bash-completion/bash_completion; source /usr/share/bash-completion/completions/cardbench;
    COMP_WORDS=(cardbench ca); COMP_CWORD=1; COMP_LINE="cardbench ca"; COMP_POINT=${#COMP_LINE}; _cardbench; echo "${COMPREPLY[*]}"')
echo "cardbench ca<TAB>: $completions"
grep -qx card <<< "$(tr ' ' '\n' <<< "$completions")" || fail "bash completion of 'cardbench ca' does not offer card"

step "the daemon as the unit runs it: a member of cardbench sells over the socket, a non-member is refused"
getent passwd cb-member >/dev/null || useradd --no-create-home --shell /usr/sbin/nologin --groups cardbench cb-member
getent passwd cb-outsider >/dev/null || useradd --no-create-home --shell /usr/sbin/nologin cb-outsider
# /run/cardbench, as tmpfiles.d made it at installation (the unit's RuntimeDirectory=).
runtime=/run/cardbench
[ "$(stat -c '%U:%G %a' "$runtime")" = "cardbench:cardbench 750" ] || fail "$runtime: $(stat -c '%U:%G %a' "$runtime") (tmpfiles.d)"
# User=/Group=/SupplementaryGroups=, UMask=, StateDirectory=/RuntimeDirectory= and WorkingDirectory=.
(cd /var/lib/cardbench && umask 0007 && exec env STATE_DIRECTORY=/var/lib/cardbench RUNTIME_DIRECTORY="$runtime" \
    setpriv --reuid=cardbench --regid=cardbench --init-groups cardbenchd --config /etc/cardbench/cardbenchd.yaml --demo ) \
    > "$work.unit.log" 2>&1 &
daemon=$!
pids+=("$daemon")
for _ in $(seq 1 200); do [ -S "$runtime/control.sock" ] && break; sleep 0.05; done
[ -S "$runtime/control.sock" ] || { cat "$work.unit.log"; fail "the daemon did not start as user cardbench"; }
ls -l "$runtime/control.sock"
[ "$(stat -c '%U:%G %a' "$runtime/control.sock")" = "cardbench:cardbench 660" ] || fail "control.sock: $(stat -c '%U:%G %a' "$runtime/control.sock")"
reply=$(setpriv --reuid=cb-member --regid=cb-member --init-groups cardbench open --socket "$runtime/control.sock" "${URL}member")
echo "member: $reply"
grep -q 'status=success' <<< "$reply" || fail "a member of cardbench could not sell"
if out=$(setpriv --reuid=cb-outsider --regid=cb-outsider --init-groups cardbench open --socket "$runtime/control.sock" "${URL}outsider" 2>&1); then
    fail "a non-member reached the daemon: $out"
fi
echo "non-member: $out"

step "xdg-open hands a vivapayclient:// URL to cardbench open (the desktop entry), which reaches the daemon"
handler=$(xdg-mime query default x-scheme-handler/vivapayclient)
echo "x-scheme-handler/vivapayclient: $handler"
[ "$handler" = cardbench-open.desktop ] || fail "the scheme handler is $handler"
[ "$(xdg-mime query default x-scheme-handler/billpocket)" = cardbench-open.desktop ] || fail "no billpocket:// handler"
# A bench desktop's session: xdg-open consults scheme handlers only when there is a display
# (DISPLAY set; cardbench open itself needs no X server).
home=$(mktemp -d /tmp/cardbench-home.XXXXXX); chown cb-member "$home"
setpriv --reuid=cb-member --regid=cb-member --init-groups env -i PATH=/usr/bin:/bin HOME="$home" DISPLAY=:0 xdg-open "${URL}xdg" > /dev/null
rm -rf "$home"
for _ in $(seq 1 100); do
    grep -q 'install-xdg' <<< "$(cardbench tx list --json --socket "$runtime/control.sock")" && break
    sleep 0.1
done
grep -q 'install-xdg' <<< "$(cardbench tx list --json --socket "$runtime/control.sock")" || fail "the sale xdg-open asked for is not in the ledger"
echo "the sale xdg-open asked for is in the ledger"
kill "$daemon"; wait "$daemon" || true
[ -s /var/lib/cardbench/ledger.sqlite ] || fail "no ledger in /var/lib/cardbench"
userdel cb-member; userdel cb-outsider

step "purge"
apt-get purge -y -qq cardbench >/dev/null
if grep -q '^Status: install ok installed' <<< "$(dpkg -s cardbench 2>/dev/null)"; then fail "still installed"; fi
# Every file of the package is gone; directories are checked below: the package's own must be
# gone, the shared ones (/usr/bin, /usr/share/man/man1, ...) stay.
for f in $installed; do
    if [ -e "$f" ] && [ ! -d "$f" ]; then fail "$f is left after the purge"; fi
done
for d in /etc/cardbench /var/lib/cardbench /usr/share/cardbench /usr/share/doc/cardbench; do
    if [ -e "$d" ]; then fail "$d is left after the purge"; fi
done
echo "purged: no file of the package, no /etc/cardbench, no /var/lib/cardbench (the system user cardbench stays, as Debian leaves system users)"
echo; echo "install-test: passed"
