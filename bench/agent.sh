#!/usr/bin/env bash
# Cost of `kcrash agent` (docs/agent.md, "Cost targets"), side by side with
# a `kcrash run` that reads /dev/kmsg itself:
#   ingest: while RATE (10,000) marked records a minute arrive in the real
#           /dev/kmsg for DUR (90) seconds, the agent's CPU (utime+stime of
#           /proc/PID/stat over the period, as % of one core) and peak RSS
#           (VmHWM), and the same of a `kcrash run -- sleep` over the same
#           period. Targets for the agent: <= 0.2 % of a core, <= 30 MiB.
#   query:  an agent whose journal holds one hour of records, a typical hour
#           (2,000) and a flood hour (600,000, RATE for an hour), asked for
#           the last hour by a client (api.Client) as root and as an
#           unprivileged user: p50/p95 of N (20) queries. Target <= 20 ms.
# Usage (as root): bench/agent.sh [kcrash-binary]
#        DUR=90 RATE=10000 N=20 BENCH_USER=kcrash-bench by default;
#        PARTS=ingest or PARTS=query for one half.
# The records written start with the test marker kcrash-test[TOKEN]: and say
# only "agent bench record N", at level debug; each is written on its own
# open of /dev/kmsg, so the kernel's per-writer rate limit
# (printk_devkmsg=ratelimit) is left as it is. While writing, the flood holds
# the flock kcrash's tests take on /dev/kmsg (internal/testlock).
. "$(dirname "$0")/lib.sh"
dur=${DUR:-90}
rate=${RATE:-10000}
nq=${N:-20}
user=${BENCH_USER:-kcrash-bench}
parts=${PARTS:-ingest,query}

[ "$(id -u)" = 0 ] || { echo "bench/agent.sh runs as root (it writes /dev/kmsg and starts the agent)" >&2; exit 2; }
[ -w /dev/kmsg ] || { echo "/dev/kmsg is not writable" >&2; exit 2; }
command -v setpriv >/dev/null || { echo "needs setpriv (util-linux)" >&2; exit 2; }

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

CGO_ENABLED=0 go build -o "$tmp/agent-load" ./bench/agent-load
# The unprivileged client reaches the sockets and the load tool through $tmp.
chmod 0711 "$tmp"
chmod 0755 "$tmp/agent-load"
if ! id "$user" >/dev/null 2>&1; then
	useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
uid=$(id -u "$user")

# waitfor SECONDS CMD...: poll a condition until it holds.
waitfor() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt "$end" ] || { echo "timed out waiting for: $*" >&2; return 1; }
		sleep 0.05
	done
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
reads_kmsg() { [ "$(readlink -f "/proc/$1/fd/"* 2>/dev/null | grep -c '^/dev/kmsg$')" -gt 0 ]; }
hz=$(getconf CLK_TCK)
token=agentbench-$$-$(date +%s)

if [[ $parts == *ingest* ]]; then
echo "== ingest: $rate marked records a minute into /dev/kmsg for ${dur}s (token $token)"
mkdir -p "$tmp/idle"
"$kc" agent --socket "$tmp/idle/agent.sock" --state "$tmp/idle/state" --no-gpu 2>"$tmp/idle/agent.log" &
agent=$!
pids+=("$agent")
waitfor 20 test -S "$tmp/idle/agent.sock"
KCRASH_OUT=$tmp/bundles "$kc" run -q -- sleep 100000 >/dev/null 2>&1 &
run=$!
pids+=("$run")
waitfor 20 reads_kmsg "$run"
a0=$(ticks "$agent") r0=$(ticks "$run") t0=$(date +%s.%N)
"$tmp/agent-load" flood -rate "$rate" -for "${dur}s" -token "$token" &
pids+=($!)
wait $!
a1=$(ticks "$agent") r1=$(ticks "$run") t1=$(date +%s.%N)
arss=$(kib "$agent" VmHWM) rrss=$(kib "$run" VmHWM)
# What the agent journaled of the flood: its marked records, as the token's client sees them.
seen=$("$tmp/agent-load" query -socket "$tmp/idle/agent.sock" -n 1 -mark "$token" -window "$((dur + 120))s")
kill -KILL "$(pgrep -P "$run" -x sleep)" 2>/dev/null || true
wait "$run" 2>/dev/null || true
kill -TERM "$agent"
wait "$agent" 2>/dev/null || true
pct() { echo "scale=3; 100 * ($2 - $1) / $hz / ($t1 - $t0)" | bc -l; }
acpu=$(pct "$a0" "$a1") rcpu=$(pct "$r0" "$r1")
printf '%-28s %14s %16s\n' "" "CPU (% of core)" "peak RSS (MiB)"
printf '%-28s %13.3f%% %16.1f\n' "kcrash agent" "$acpu" "$(echo "$arss / 1024" | bc -l)"
printf '%-28s %13.3f%% %16.1f\n' "kcrash run -- sleep" "$rcpu" "$(echo "$rrss / 1024" | bc -l)"
echo "the agent's answer for the flood's token: $seen (written: $((rate * dur / 60)))"
fi

if [[ $parts == *query* ]]; then
echo "== query: the last hour, p50 / p95 of $nq queries, as root and as $user (uid $uid)"
printf '%-22s %-42s %s\n' "journal of one hour" "root: p50 / p95" "$user: p50 / p95"
results=()
for shape in typical:2000 flood:$((rate * 60)); do
	name=${shape%%:*} n=${shape##*:}
	d=$tmp/$name
	mkdir -p "$d"
	"$tmp/agent-load" fill -state "$d/state" -records "$n" -uid "$uid"
	"$kc" agent --socket "$d/agent.sock" --state "$d/state" --no-gpu 2>"$d/agent.log" &
	qa=$!
	pids+=("$qa")
	waitfor 60 test -S "$d/agent.sock"
	"$tmp/agent-load" query -socket "$d/agent.sock" -n 1 >/dev/null # warm
	asroot=$("$tmp/agent-load" query -socket "$d/agent.sock" -n "$nq")
	asuser=$(setpriv --reuid "$user" --regid "$user" --clear-groups "$tmp/agent-load" query -socket "$d/agent.sock" -n "$nq")
	kill -TERM "$qa"
	wait "$qa" 2>/dev/null || true
	rm -rf "$d"
	printf '%-22s %-42s %s\n' "$name ($n)" "$asroot" "$asuser"
done
fi
echo "targets: agent <= 0.2 % of a core and <= 30 MiB RSS; a query of one hour <= 20 ms"
