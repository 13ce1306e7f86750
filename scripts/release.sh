#!/usr/bin/env bash
# Builds a kcrash release: static binaries for linux/amd64 and linux/arm64,
# a .deb and an .rpm of each (tools/linuxpkg), and SHA256SUMS, into dist/
# (emptied first).
#
#   scripts/release.sh [VERSION]      VERSION: the tag (default: git describe)
#
# Environment: DIST (default dist, relative to the repository) the output
# directory; ARCHES (default "amd64 arm64"); SOURCE_DATE_EPOCH (default: the
# commit's time) the packages' file times.
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

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Untagged: a version the packages still order (0.0.0 plus the commit).
version=${1:-$(git describe --tags --dirty 2>/dev/null || echo "v0.0.0-dev.${commit:0:12}")}
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit+="+dirty"
fi
dist=${DIST:-dist}
arches=${ARCHES:-amd64 arm64}

# Emptied first, but only when it is a release directory (or empty): a
# mistyped DIST must not cost a directory of something else.
if [ -d "$dist" ] && [ -n "$(ls -A "$dist")" ] && [ ! -e "$dist/SHA256SUMS" ] && [ ! -e "$dist/kcrash-linux-amd64" ]; then
	echo "release.sh: $dist holds files that are not a release: not emptying it" >&2
	exit 2
fi
rm -rf "$dist"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
# The packages' file times: the commit's, so that a rebuild is the same.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

for arch in $arches; do
	bin=$dist/kcrash-linux-$arch
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags kcrash_startsignals \
		-ldflags="-checklinkname=0 -X main.version=$version -X main.commit=$commit" -o "$bin" ./cmd/kcrash
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

# The .deb and .rpm of each: nfpm as a library, in a module of its own
# (tools/linuxpkg), which first refuses any binary that is not static, for
# its architecture, with the start-signal record.
completer=$dist/kcrash-$host
[ -x "$completer" ] || completer=$dist/kcrash-linux-amd64
(cd tools/linuxpkg && go run . -repo ../.. -dist "$dist" -version "$version" -completer "$completer" $arches)

(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "release.sh: $version ($commit) in $dist:"
ls -l "$dist"
