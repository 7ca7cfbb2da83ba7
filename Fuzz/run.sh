#!/usr/bin/env bash
# Runs every fuzzer built by Fuzz/build.sh for N seconds (default 10), or only those named:
#   Fuzz/run.sh 60 tlv viva
# Each first replays its saved regressions (Fuzz/regressions/<target>/), then fuzzes a copy of its
# seed corpus in a temporary directory, so the committed seeds never grow. Any crash, property
# failure, timeout or leak fails the run; the input is kept in .build-fuzz/fuzz-artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in Fuzz/Targets/*.swift; do targets+=("$(basename "$f" .swift)"); done
fi

# Swift's own crash backtracer reads the stack in a way AddressSanitizer reports as an overflow of
# its own; with it off, a trap reaches libFuzzer's handler, which saves the input.
export SWIFT_BACKTRACE=enable=no
export LSAN_OPTIONS=suppressions=$PWD/Fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}

# The longest input worth trying per target: an ATR is at most 33 bytes, a CVM list a few dozen;
# longer inputs only repeat what shorter ones reach, more slowly. YAML files keep libFuzzer's
# default (the largest seed, at least 4096 bytes).
max_len() {
    case $1 in
        atr) echo 64 ;;
        cvm) echo 128 ;;
        dol | percent) echo 256 ;;
        tlv | t1) echo 512 ;;
        vpcd | viva | billpocket) echo 1024 ;;
        *) echo 0 ;;
    esac
}

work=$(mktemp -d "${TMPDIR:-/tmp}/cardbench-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
    bin=.build-fuzz/fuzzers/$t
    [ -x "$bin" ] || { echo "fuzz: $bin is missing; run Fuzz/build.sh" >&2; exit 2; }
    artifacts=.build-fuzz/fuzz-artifacts/$t/
    mkdir -p "$artifacts" "$work/$t"
    if compgen -G "Fuzz/regressions/$t/*" >/dev/null; then
        if ! "$bin" -artifact_prefix="$artifacts" Fuzz/regressions/"$t"/* >"$work/$t.regressions.log" 2>&1; then
            tail -n 40 "$work/$t.regressions.log"
            failed+=("$t (regressions)")
            continue
        fi
    fi
    cp Fuzz/corpus/"$t"/* "$work/$t/"
    if "$bin" -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts" \
        "$work/$t" >"$work/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
        last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -n 1 || true)
        echo "fuzz $t: ${runs:-?} runs in ${seconds}s, no crash (${last})"
    else
        tail -n 40 "$work/$t.log"
        echo "fuzz $t: FAILED; the input is in $artifacts" >&2
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]}" >&2
    echo "fuzz: $(( ${#targets[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed"
    exit 1
fi
echo "fuzz: ${#targets[@]} passed, 0 failed"
