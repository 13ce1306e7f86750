#!/usr/bin/env bash
# Fleet index throughput: `kcrash buckets --index` over bundles written by
# kcrash's own writer (bench/gen-fleet).
#
#   bench/fleet.sh                    # 2,000 bundles, then 1,000 new
#   N=20000 NEW=1000 bench/fleet.sh   # larger
#   bench/fleet.sh /path/to/kcrash
#
# Rows: indexing N bundles from scratch (wall, max RSS), adding NEW bundles
# to that index, and a report with nothing new (the bucket query: every
# source file stat'ed, summaries loaded, grouped). Issue 26's targets:
# 100,000 bundles <= 60 s and <= 300 MiB; 1,000 new <= 2 s; a query <= 100 ms.
source "$(dirname "$0")/lib.sh"
N=${N:-2000}
NEW=${NEW:-1000}
go build -o "$tmp/gen-fleet" ./bench/gen-fleet
echo "generating $N + $NEW bundles..." >&2
"$tmp/gen-fleet" -n "$N" -out "$tmp/fleet" -seed 1
now=2026-12-03T00:00:00Z
measure() { # label, then the command
	local label=$1; shift
	/usr/bin/time -f '%e %M' -o "$tmp/t" "$@" >/dev/null
	read -r wall rss <"$tmp/t"
	printf '%-34s %8.2f s %8d KiB max RSS\n' "$label" "$wall" "$rss"
}
measure "index $N from scratch" "$kc" buckets "$tmp/fleet" --index "$tmp/i.db" --now "$now" --json
"$tmp/gen-fleet" -n "$NEW" -out "$tmp/fleet" -seed 2
measure "add $NEW new" "$kc" buckets "$tmp/fleet" --index "$tmp/i.db" --now "$now" --json
measure "report, nothing new ($((N + NEW)))" "$kc" buckets "$tmp/fleet" --index "$tmp/i.db" --now "$now" --json
measure "report without index ($((N + NEW)))" "$kc" buckets "$tmp/fleet" --now "$now" --json
du -sh "$tmp/fleet" "$tmp/i.db" | sed 's/^/size: /'
