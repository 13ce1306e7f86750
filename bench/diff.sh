#!/usr/bin/env bash
# `kcrash diff` of two large level-3 kernel-API logs: wall time and max RSS.
#
#   bench/diff.sh                  # two 1 GiB logs
#   SIZE_MB=256 bench/diff.sh      # smaller
#   KCRASH=/path/to/kcrash bench/diff.sh
#
# Generates two synthetic level-3 SGLang logs of SIZE_MB each with different
# batch-size sequences (bench/gen-kernelapi-log, seeds 1 and 2) into a
# temporary directory, reads them once so that they are in the page cache,
# then runs `kcrash diff A B --json` RUNS times (default 3) under
# /usr/bin/time -v and prints the fastest wall time and the largest RSS.
# Targets: two 1 GiB logs within 60 s and 100 MiB max RSS.
# STRICT=1 makes a missed target fail the script. KEEP=1 keeps the temp dir.
SIZE_MB=${SIZE_MB:-1024}
RUNS=${RUNS:-3}
MAX_S=${MAX_S:-60}
MAX_RSS_MB=${MAX_RSS_MB:-100}
. "$(dirname "$0")/lib.sh" "${KCRASH:-}"
kcrash=$kc
if [[ "${KEEP:-0}" == 1 ]]; then
	trap - EXIT
	echo "keeping $tmp" >&2
fi
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }

go build -o "$tmp/gen" ./bench/gen-kernelapi-log
echo "generating two ${SIZE_MB} MiB level-3 logs" >&2
"$tmp/gen" -size "$SIZE_MB" -seed 1 -o "$tmp/kapi_1001.log"
"$tmp/gen" -size "$SIZE_MB" -seed 2 -o "$tmp/kapi_2002.log"
bytes=$(($(stat -c %s "$tmp/kapi_1001.log") + $(stat -c %s "$tmp/kapi_2002.log")))
cat "$tmp/kapi_1001.log" "$tmp/kapi_2002.log" >/dev/null

wall="" rss=0 walls=""
for ((i = 1; i <= RUNS; i++)); do
	/usr/bin/time -v -o "$tmp/time" "$kcrash" diff --json "$tmp/kapi_1001.log" "$tmp/kapi_2002.log" >"$tmp/out.json"
	w=$(awk -F': ' '/Elapsed \(wall clock\)/ {
		n = split($2, p, ":"); s = 0
		for (i = 1; i <= n; i++) s = s * 60 + p[i]
		print s }' "$tmp/time")
	r=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
	walls="$walls $w"
	if [[ -z "$wall" ]] || awk -v a="$w" -v b="$wall" 'BEGIN { exit !(a < b) }'; then
		wall=$w
	fi
	((r > rss)) && rss=$r
done
printf 'inputs: 2 x %s MiB (%d bytes), calls: %s\n' "$SIZE_MB" "$bytes" \
	"$(grep -o '"calls": [0-9]*' "$tmp/out.json" | sed -n '1p;3p' | awk '{print $2}' | paste -sd/)" # a.calls, a.processes[0].calls, b.calls
awk -v b="$bytes" -v w="$wall" -v r="$rss" -v all="$walls" 'BEGIN {
	if (w <= 0) w = 0.005
	printf "kcrash diff: %.2f s (%.1f MB/s) %.1f MiB max RSS   (runs:%s s)\n", w, b / w / 1e6, r / 1024, all }'
if ! awk -v w="$wall" -v r="$rss" -v s="$MAX_S" -v m="$MAX_RSS_MB" 'BEGIN { exit !(w <= s && r / 1024 <= m) }'; then
	echo "  outside the target: <= $MAX_S s and <= $MAX_RSS_MB MiB" >&2
	[[ "${STRICT:-0}" == 1 ]] && exit 1
fi
exit 0
