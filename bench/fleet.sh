#!/usr/bin/env bash
# Fleet index throughput: `kcrash buckets --index` over bundles written by
# kcrash's own writer (bench/gen-fleet).
#
#   bench/fleet.sh                    # 2,000 bundles, then 1,000 new
#   N=20000 NEW=1000 bench/fleet.sh   # larger
#   bench/fleet.sh /path/to/kcrash
#   PG_DSN=$(scripts/pg-test-server.sh up) bench/fleet.sh   # PostgreSQL rows too
#   FLEET=DIR N=100000 bench/fleet.sh # N bundles made before (bench/gen-fleet -n N -out DIR -seed 1)
#
# Rows: indexing N bundles from scratch (wall, max RSS), adding NEW bundles
# to that index, a report with nothing new (every source file stat'ed, the
# window read from the index, grouped), and the bucket query: a report from
# the index alone (`kcrash buckets --index X`, no SOURCE), on SQLite and,
# with PG_DSN, on PostgreSQL (in a schema of its own, dropped on exit), whose
# JSON must be the same. The bundles span 7 days, so the whole index is in
# the 7-day window here; BenchmarkBucketQuery (fleet/index/sqlstore) has
# indexes of 10,000 and 100,000 over longer spans. Issue 26's targets:
# 100,000 bundles <= 60 s and <= 300 MiB; 1,000 new <= 2 s; a query <= 100 ms.
source "$(dirname "$0")/lib.sh"
N=${N:-2000}
NEW=${NEW:-1000}
go build -o "$tmp/gen-fleet" ./bench/gen-fleet
if [ -n "${FLEET:-}" ]; then
	# generating 100,000 takes minutes: made once, copied here so that the
	# NEW bundles land beside a copy
	echo "copying $N bundles from $FLEET..." >&2
	cp -a "$FLEET" "$tmp/fleet"
else
	echo "generating $N + $NEW bundles..." >&2
	"$tmp/gen-fleet" -n "$N" -out "$tmp/fleet" -seed 1
fi
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
measure "bucket query, SQLite ($((N + NEW)))" "$kc" buckets --index "$tmp/i.db" --now "$now" --json
measure "report without index ($((N + NEW)))" "$kc" buckets "$tmp/fleet" --now "$now" --json
if [ -n "${PG_DSN:-}" ]; then
	schema=kcrash_bench_$$
	psql -X -q "$PG_DSN" -c "CREATE SCHEMA $schema"
	trap 'psql -X -q "$PG_DSN" -c "SET client_min_messages = warning" -c "DROP SCHEMA $schema CASCADE"; rm -rf "$tmp"' EXIT
	pg="$PG_DSN&search_path=$schema"
	measure "index $((N + NEW)) into PostgreSQL" "$kc" buckets "$tmp/fleet" --index "$pg" --now "$now" --json
	measure "bucket query, PostgreSQL ($((N + NEW)))" "$kc" buckets --index "$pg" --now "$now" --json
	"$kc" buckets --index "$tmp/i.db" --now "$now" --json >"$tmp/lite.json"
	"$kc" buckets --index "$pg" --now "$now" --json >"$tmp/pg.json"
	cmp -s "$tmp/lite.json" "$tmp/pg.json" && echo "same JSON on SQLite and PostgreSQL" || echo "JSON DIFFERS between SQLite and PostgreSQL"
fi
du -sh "$tmp/fleet" "$tmp/i.db" | sed 's/^/size: /'
