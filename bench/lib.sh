# Sourced by the bench scripts: a scratch directory removed on exit, and the
# kcrash binary to measure ($1 when given, else a static build of this tree).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kc=${1:-}
if [ -z "$kc" ]; then
	CGO_ENABLED=0 go build -tags kcrash_startsignals -ldflags=-checklinkname=0 -o "$tmp/kcrash" ./cmd/kcrash
	kc=$tmp/kcrash
fi
