#!/usr/bin/env bash
# Kernel-API log analysis throughput, next to `grep -c` on the same file.
#
#   bench/kernelapi.sh                 # 1 GiB level-3 log
#   SIZE_MB=256 bench/kernelapi.sh     # smaller
#   KCRASH=/path/to/kcrash bench/kernelapi.sh
#
# Generates a synthetic level-3 SGLang log (bench/gen-kernelapi-log) into a
# temporary directory, reads it once so that every tool finds it in the page
# cache, then runs under /usr/bin/time -v:
#   - `kcrash triage --kernel-api-log FILE --json` (KCRASH, or ./cmd/kcrash
#     built here) when that kcrash has the flag;
#   - bench/kernelapi-analyze FILE (the analyzer alone, kernelapi.Analyze);
#   - grep -c 'Kernel API Call' FILE.
# Each tool runs RUNS times (default 3), one after the other; its row shows
# the fastest run (the one least disturbed by other load) and the largest RSS
# of all runs.
# Targets: >= 300 MB/s and <= 50 MiB max RSS for kcrash.
# STRICT=1 makes a missed target fail the script. KEEP=1 keeps the temp dir.
# LOG=FILE measures an existing log instead of generating one.
set -euo pipefail

SIZE_MB=${SIZE_MB:-1024}
RUNS=${RUNS:-3}
MIN_MBPS=${MIN_MBPS:-300}
MAX_RSS_MB=${MAX_RSS_MB:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kcrash-kapi-bench.XXXXXX")
if [[ "${KEEP:-0}" != 1 ]]; then
	trap 'rm -rf "$tmp"' EXIT
fi

[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }

cd "$root"
go build -o "$tmp/gen" ./bench/gen-kernelapi-log
go build -o "$tmp/kernelapi-analyze" ./bench/kernelapi-analyze
if [[ -n "${LOG:-}" ]]; then
	log=$LOG
else
	log="$tmp/kapi_4242.log"
	echo "generating ${SIZE_MB} MiB level-3 log in $log" >&2
	"$tmp/gen" -size "$SIZE_MB" -o "$log"
fi
bytes=$(stat -c %s "$log")
cat "$log" >/dev/null

kcrash=${KCRASH:-}
if [[ -z "$kcrash" ]] && go build -o "$tmp/kcrash" ./cmd/kcrash 2>/dev/null; then
	kcrash="$tmp/kcrash"
fi
if [[ -n "$kcrash" ]] && ! "$kcrash" triage --help 2>/dev/null | grep -q -- '--kernel-api-log'; then
	echo "note: $kcrash has no 'triage --kernel-api-log' yet; measuring the analyzer alone" >&2
	kcrash=""
fi

# run NAME CMD...: runs CMD RUNS times under /usr/bin/time -v, stdout to
# $tmp/NAME.out, and prints one result row.
fail=0
run() {
	local name=$1
	shift
	local i w r wall="" rss=0 walls=""
	for ((i = 1; i <= RUNS; i++)); do
		/usr/bin/time -v -o "$tmp/$name.time" "$@" >"$tmp/$name.out"
		w=$(awk -F': ' '/Elapsed \(wall clock\)/ {
			n = split($2, p, ":"); s = 0
			for (i = 1; i <= n; i++) s = s * 60 + p[i]
			print s }' "$tmp/$name.time")
		r=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/$name.time")
		walls="$walls $w"
		if [[ -z "$wall" ]] || awk -v a="$w" -v b="$wall" 'BEGIN { exit !(a < b) }'; then
			wall=$w
		fi
		((r > rss)) && rss=$r
	done
	awk -v n="$name" -v b="$bytes" -v w="$wall" -v r="$rss" -v all="$walls" 'BEGIN {
		if (w <= 0) w = 0.005
		printf "%-18s %7.2f s %8.1f MB/s %7.1f MiB max RSS   (runs:%s s)\n", n, w, b / w / 1e6, r / 1024, all }'
	if [[ "$name" == kcrash-triage || ( -z "$kcrash" && "$name" == kernelapi-analyze ) ]]; then
		if ! awk -v b="$bytes" -v w="$wall" -v r="$rss" -v m="$MIN_MBPS" -v x="$MAX_RSS_MB" \
			'BEGIN { if (w <= 0) w = 0.005; exit !(b / w / 1e6 >= m && r / 1024 <= x) }'; then
			echo "  below target: >= $MIN_MBPS MB/s and <= $MAX_RSS_MB MiB" >&2
			fail=1
		fi
	fi
}

printf 'file: %s (%d bytes)\n' "$log" "$bytes"
if [[ -n "$kcrash" ]]; then
	run kcrash-triage "$kcrash" triage --kernel-api-log "$log" --json
fi
run kernelapi-analyze "$tmp/kernelapi-analyze" "$log"
run grep-c grep -c 'Kernel API Call' "$log"

calls=$(grep -m1 -o '"calls": *[0-9]*' "$tmp/kernelapi-analyze.out" | grep -o '[0-9]*$')
grepn=$(cat "$tmp/grep-c.out")
echo "calls: analyzer $calls, grep -c $grepn"
[[ "$calls" == "$grepn" ]] || { echo "call counts differ" >&2; fail=1; }
if [[ "$fail" == 1 && "${STRICT:-0}" == 1 ]]; then
	exit 1
fi
