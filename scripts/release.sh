#!/usr/bin/env bash
# Builds a kcrash release: static binaries for linux/amd64 and linux/arm64,
# a .deb and an .rpm of each, and SHA256SUMS, into dist/ (emptied first).
#
#   scripts/release.sh [VERSION]      VERSION: the tag (default: git describe)
#
# Environment: DIST (default dist) the output directory; ARCHES (default
# "amd64 arm64").
#
# Every binary is built as docs/install.md's go install line builds it:
# CGO_ENABLED=0 (static: runs on any Linux of its architecture, whatever its
# C library) and -tags kcrash_startsignals -ldflags=-checklinkname=0 (the
# runtime's record of the signals kcrash started with; see
# supervisor/startsignals_runtime_linux.go), with the version and commit
# stamped. A binary that lost either fails the release.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || true)}
[ -n "$version" ] || { echo "release.sh: no VERSION given and git describe found none" >&2; exit 2; }
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit+="+dirty"
fi
dist=${DIST:-dist}
arches=${ARCHES:-amd64 arm64}

rm -rf "$dist"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)

for arch in $arches; do
	bin=$dist/kcrash-linux-$arch
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags kcrash_startsignals \
		-ldflags="-checklinkname=0 -X main.version=$version -X main.commit=$commit" -o "$bin" ./cmd/kcrash
	# The binary's own record of how it was built: the release lost nothing.
	meta=$(go version -m "$bin")
	for want in $'\tbuild\tCGO_ENABLED=0' $'\tbuild\t-tags=kcrash_startsignals' $'\tbuild\tGOARCH='"$arch"; do
		grep -qF -- "$want" <<<"$meta" || { echo "release.sh: $bin: no \"${want//$'\t'/ }\" in go version -m:" >&2; echo "$meta" >&2; exit 1; }
	done
done

# The binary this machine can run says itself what it is.
host=$(go env GOOS)-$(go env GOARCH)
if [ -x "$dist/kcrash-$host" ]; then
	said=$("$dist/kcrash-$host" version)
	echo "$said"
	if ! grep -q "^kcrash $version " <<<"$said" || ! grep -q '^linked: static' <<<"$said" ||
		! grep -q '^signals at start: all kept' <<<"$said" || grep -q '^warning:' <<<"$said"; then
		echo "release.sh: kcrash-$host version does not say a whole release build" >&2
		exit 1
	fi
fi

(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "release.sh: $version ($commit) in $dist:"
ls -l "$dist"
