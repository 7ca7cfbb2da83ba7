#!/usr/bin/env bash
# Runs lintian on the package: any error fails; warnings are printed (each one is fixed or
# explained by an override in packaging/debian/lintian-overrides, which the package ships).
set -euo pipefail
deb=${1:?usage: packaging/lintian.sh cardbench_VERSION_ARCH.deb}
out=$(lintian --info --display-info --fail-on none "$deb" 2>&1) || true
echo "$out"
if echo "$out" | grep -q '^E: '; then
    echo "lintian: errors in $deb" >&2
    exit 1
fi
echo "lintian: no errors in $deb ($(echo "$out" | grep -c '^W: ' || true) warnings)"
