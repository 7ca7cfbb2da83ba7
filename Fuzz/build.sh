#!/usr/bin/env bash
# Builds every fuzzer into .build-fuzz/fuzzers/<target>, or only those named: Fuzz/build.sh tlv viva
#
# SwiftPM builds the package's library targets (not products, so nothing links a main) with
# coverage and AddressSanitizer into .build-fuzz; then swiftc compiles each Fuzz/Targets/<t>.swift
# against those modules and links it with libFuzzer's main. `-enable-testing` lets the targets
# reach internal parsers (@testable import) without making them public.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SWIFTC=${SWIFTC:-swiftc}
SCRATCH=.build-fuzz
OUT=$SCRATCH/fuzzers
SANITIZE=(-sanitize=fuzzer,address)

# Which Sources files a target compiles in itself, when its module cannot be built alone: the
# Scenario module depends on the whole daemon (Hummingbird, GRDB, …), its scenario file parser on
# Yams and Foundation only.
extra_sources() {
    case $1 in
        scenario) echo Sources/Scenario/ScenarioFile.swift ;;
    esac
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in Fuzz/Targets/*.swift; do targets+=("$(basename "$f" .swift)"); done
fi

# The modules: Fronts brings EMV and Terminal, VirtualCard brings Yams, CardIO the rest.
for module in VirtualCard Fronts CardIO ISO8583; do
    "$SWIFT" build -c release --scratch-path "$SCRATCH" --target "$module" -Xswiftc "${SANITIZE[@]}" -Xswiftc -enable-testing
done
BIN=$("$SWIFT" build -c release --scratch-path "$SCRATCH" --show-bin-path)

# Every object built in the scratch path: for a Swift module those its output file map names (a
# source since removed leaves a stale object behind), for a C module all of them. A dependency's C
# module is found through its include directory (Yams' CYaml, swift-crypto's BoringSSL) and the
# module map SwiftPM made for it when it has none; the
# package's own through their module maps (libcrypto, libudev and libpcsclite shims)
objects=()
clang_modules=()
# (a C target's own module map sits in its include directory, as CLibPCSCLite's does).
for map in Sources/CLib*/module.modulemap Sources/CLib*/include/module.modulemap; do
    [ -f "$map" ] && clang_modules+=(-Xcc "-fmodule-map-file=$map")
done
# Its headers' own includes (<pcsclite.h> forwarded by a header there) resolve from that directory.
for include in Sources/CLib*/include; do
    [ -d "$include" ] && clang_modules+=(-Xcc "-I$include")
done
for dir in "$BIN"/*.build; do
    if [ -f "$dir/output-file-map.json" ]; then
        while IFS= read -r o; do [ -f "$o" ] && objects+=("$o"); done \
            < <(sed -n 's/^ *"object": "\(.*\)",\{0,1\}$/\1/p' "$dir/output-file-map.json")
    else
        while IFS= read -r o; do objects+=("$o"); done < <(find "$dir" -name '*.o' | sort)
        # A C module with no module map of its own (SwiftNIO's CNIOAtomics, CNIOLinux, …) has the
        # one SwiftPM generated in its build directory.
        [ -f "$dir/module.modulemap" ] && clang_modules+=(-Xcc "-fmodule-map-file=$dir/module.modulemap")
        for include in "$SCRATCH"/checkouts/*/Sources/"$(basename "$dir" .build)"/include; do
            [ -d "$include" ] && clang_modules+=(-Xcc "-I$include")
        done
    fi
done

mkdir -p "$OUT"
for t in "${targets[@]}"; do
    echo "linking $OUT/$t"
    # shellcheck disable=SC2046
    "$SWIFTC" -O -swift-version 6 -parse-as-library "${SANITIZE[@]}" -use-ld=lld -module-name "Fuzz_$t" \
        -I "$BIN/Modules" "${clang_modules[@]}" \
        "Fuzz/Targets/$t.swift" Fuzz/Support/*.swift $(extra_sources "$t") \
        "${objects[@]}" -o "$OUT/$t"
done
