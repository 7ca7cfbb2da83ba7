#!/usr/bin/env bash
# Builds cardbench_<version>_<arch>.deb: a release build with the Swift runtime linked in,
# staged as Debian lays it out and packed by dpkg-deb (docs/operations.md says why not debhelper).
#   packaging/deb.sh [OUTPUT_DIRECTORY]        (make deb)
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
OUT=${1:-.}
# Its own scratch path: the debug build of `make test` and this release build do not share one.
SCRATCH=${SCRATCH:-.build-deb}

# One release build of every product, through swift-argument-parser's generate-manual plugin,
# which builds the package and then writes each command's man page from its own help. The Swift
# runtime is linked in (-static-stdlib: no /opt/swift at run time, hence no toolchain RUNPATH),
# and the binaries are linked with BIND_NOW. (`swift build --static-swift-stdlib` followed by the
# plugin would compile a good part of the package twice: the plugin builds with the flags given
# to `swift package`, so these are given there.)
echo "building cardbench and cardbenchd (release, Swift runtime linked statically) and their man pages"
date=$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%d)
"$SWIFT" package --scratch-path "$SCRATCH" -c release -Xswiftc -static-stdlib -Xswiftc -no-toolchain-stdlib-rpath \
    -Xlinker -z -Xlinker now plugin generate-manual --configuration release --date "$date" --authors "cardbench maintainers"
BIN=$("$SWIFT" build -c release --scratch-path "$SCRATCH" --show-bin-path)
version=$("$BIN/cardbench" --version)
arch=$(dpkg --print-architecture)
if ldd "$BIN/cardbenchd" | grep -q libswiftCore; then
    echo "deb.sh: $BIN/cardbenchd links the Swift runtime dynamically" >&2; exit 1
fi
manuals="$SCRATCH/plugins/GenerateManual/outputs"
[ -f "$manuals/cardbench/cardbench.1" ] && [ -f "$manuals/cardbenchd/cardbenchd.1" ] || {
    echo "deb.sh: generate-manual wrote no cardbench.1/cardbenchd.1 under $manuals" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/cardbench-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root="$stage/cardbench_${version}_${arch}"
umask 022
mkdir -p "$root/DEBIAN"

# Binaries: stripped; no -dbgsym package (docs/operations.md).
for b in cardbench cardbenchd; do
    install -D -m 0755 "$BIN/$b" "$root/usr/bin/$b"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$b"
done

# systemd, sysusers.d, tmpfiles.d, udev.
install -D -m 0644 systemd/cardbenchd.service "$root/usr/lib/systemd/system/cardbenchd.service"
install -D -m 0644 systemd/cardbenchd.socket "$root/usr/lib/systemd/system/cardbenchd.socket"
install -D -m 0644 systemd/sysusers.d/cardbench.conf "$root/usr/lib/sysusers.d/cardbench.conf"
install -D -m 0644 packaging/tmpfiles.d/cardbench.conf "$root/usr/lib/tmpfiles.d/cardbench.conf"
install -D -m 0644 udev-rules/70-cardbench.rules "$root/usr/lib/udev/rules.d/70-cardbench.rules"

# The configuration (a conffile).
install -D -m 0644 systemd/cardbenchd.yaml "$root/etc/cardbench/cardbenchd.yaml"
echo /etc/cardbench/cardbenchd.yaml > "$root/DEBIAN/conffiles"

# Card profiles, CA keys, scenarios, the observability kit.
share="$root/usr/share/cardbench"
mkdir -p "$share/cards" "$share/ca" "$share/scenarios" "$share/observability"
install -m 0644 Scenarios/cards/*.yaml "$share/cards/"
install -m 0644 Scenarios/ca/*.yaml "$share/ca/"
(cd Scenarios && find . -path ./cards -prune -o -path ./ca -prune -o -type f \( -name '*.yaml' -o -name '*.md' \) -print) |
    while read -r f; do install -D -m 0644 "Scenarios/$f" "$share/scenarios/$f"; done
install -m 0644 packaging/observability/cardbench-dashboard.json packaging/observability/cardbench-alerts.yaml \
    packaging/observability/prometheus-farm.yaml "$share/observability/"

# Man pages, completions, the scheme handler.
man="$root/usr/share/man"
install -D -m 0644 "$manuals/cardbench/cardbench.1" "$man/man1/cardbench.1"
# generate-manual writes mdoc: the section is the .Dt line's.
sed -e 's/^\.Dt CARDBENCHD 1$/.Dt CARDBENCHD 8/' "$manuals/cardbenchd/cardbenchd.1" > "$stage/cardbenchd.8"
grep -q '^\.Dt CARDBENCHD 8$' "$stage/cardbenchd.8" || { echo "deb.sh: cardbenchd's page has no .Dt CARDBENCHD 1 line to make section 8" >&2; exit 1; }
install -D -m 0644 "$stage/cardbenchd.8" "$man/man8/cardbenchd.8"
install -D -m 0644 packaging/man/cardbenchd.yaml.5 "$man/man5/cardbenchd.yaml.5"
gzip -9n "$man"/man*/*
for b in cardbench cardbenchd; do
    install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
    # A completion file is sourced, not run: no #! line.
    "$BIN/$b" --generate-completion-script bash | sed '1{/^#!/d}' > "$root/usr/share/bash-completion/completions/$b"
    "$BIN/$b" --generate-completion-script zsh > "$root/usr/share/zsh/vendor-completions/_$b"
    "$BIN/$b" --generate-completion-script fish > "$root/usr/share/fish/vendor_completions.d/$b.fish"
done
install -D -m 0644 packaging/applications/cardbench-open.desktop "$root/usr/share/applications/cardbench-open.desktop"

# Documentation.
doc="$root/usr/share/doc/cardbench"
install -D -m 0644 README.md "$doc/README.md"
install -m 0644 docs/*.md docs/openapi.yaml "$doc/"
install -D -m 0644 polkit/50-cardbench-pcsc.rules "$doc/examples/50-cardbench-pcsc.rules"
install -m 0644 packaging/debian/copyright "$doc/copyright"
install -D -m 0644 packaging/debian/lintian-overrides "$root/usr/share/lintian/overrides/cardbench"
gzip -9n -c packaging/debian/changelog > "$doc/changelog.gz"

# Maintainer scripts and control.
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
# Depends from what the binaries really link (dpkg-shlibdeps wants a debian/control to read).
mkdir -p "$stage/src/debian"
printf 'Source: cardbench\n\nPackage: cardbench\nArchitecture: any\n' > "$stage/src/debian/control"
depends=$(cd "$stage/src" && dpkg-shlibdeps -O "$root/usr/bin/cardbench" "$root/usr/bin/cardbenchd" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    packaging/debian/control.in > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles" "$root/DEBIAN/control"

mkdir -p "$OUT"
deb="$OUT/cardbench_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "built $deb ($(du -h "$deb" | cut -f1); installed $(( size / 1024 )) MiB)"
