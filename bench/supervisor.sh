#!/usr/bin/env bash
# Side-by-side figures for `kcrash run`:
#   throughput: a child writing 512 MiB through kcrash (pty) vs script -qfec vs a
#               raw pty reader (the floor: a 15-line Python copy loop) vs the
#               bare command; kcrash --no-pty vs tee; stdout to /dev/null.
#               Both streams: the child writing to stdout, then to stderr
#               (kcrash's stderr then goes to another file than its stdout,
#               so the child's stderr is a stream of its own: a pipe in batch
#               mode; script(1) and the raw reader take both from one pty).
#               Targets: pty >= 1.0x script and >= 0.9x the raw reader;
#               --no-pty >= 1.2x tee.
#   syscalls:   strace -c -f counts of a 32 MiB run (when strace is installed)
#   memory:     kcrash's peak RSS when the child writes 100 MiB and 4 GiB
#   start-up:   kcrash run -- true vs script -qec true (median of N)
# Usage: bench/supervisor.sh [kcrash-binary]   (builds one when not given)
#        REPS=5 STARTS=50 by default-ish; REPS=1 STARTS=5 for a quick look.
# Run it on an idle machine: under load every tool slows down and the ratios
# shrink towards 1 (the pump's own cost hides behind the scheduler's), which
# is why figures taken on a busy machine disagree with idle ones.
. "$(dirname "$0")/lib.sh"
export KCRASH_OUT=$tmp/bundles
reps=${REPS:-3}

now() { date +%s.%N; }
mbps() { echo "scale=0; 512 / $1" | bc -l; }

head -c $((512 << 20)) /dev/urandom >"$tmp/data"
cat "$tmp/data" >/dev/null # page cache

# The raw reader: what copying a pty master to stdout costs with nothing else.
cat >"$tmp/rawpty.py" <<'PY'
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = sys.stdout.fileno()
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the pty
        break
    if not b:
        break
    os.write(out, b)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
PY

echo "== throughput: child writes 512 MiB, stdout to /dev/null (median of $reps, tools interleaved)"
# One run of each tool per round, so that drift in the machine's load hits all alike.
declare -A times
once() { # label cmd...
	local a b
	a=$(now)
	"${@:2}" >/dev/null 2>&1 || true
	b=$(now)
	times[$1]+="$(echo "$b - $a" | bc -l) "
}
oncerr() { # label cmd...: as once, stdout and stderr to two different sinks
	local a b
	a=$(now)
	"${@:2}" >/dev/null 2>/dev/zero || true
	b=$(now)
	times[$1]+="$(echo "$b - $a" | bc -l) "
}
for _ in $(seq "$reps"); do
	once bare cat "$tmp/data"
	once script script -qfec "cat $tmp/data" /dev/null
	once raw python3 "$tmp/rawpty.py" cat "$tmp/data"
	once kcp "$kc" run -q --collect never -- cat "$tmp/data"
	once tee sh -c "cat $tmp/data | tee /dev/null"
	once kcn "$kc" run -q --collect never --no-pty -- cat "$tmp/data"
	once script_e script -qfec "cat $tmp/data >&2" /dev/null
	once raw_e python3 "$tmp/rawpty.py" sh -c "cat $tmp/data >&2"
	oncerr kcp_e "$kc" run -q --collect never -- sh -c "cat $tmp/data >&2"
	oncerr kcn_e "$kc" run -q --collect never --no-pty -- sh -c "cat $tmp/data >&2"
done
median() { printf '%s\n' ${times[$1]} | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
bare=$(median bare) scr=$(median script) raw=$(median raw) kcp=$(median kcp) tee_=$(median tee) kcn=$(median kcn)
printf '%-34s %8.3fs %6s MB/s\n' "bare cat" "$bare" "$(mbps "$bare")"
printf '%-34s %8.3fs %6s MB/s\n' "script -qfec" "$scr" "$(mbps "$scr")"
printf '%-34s %8.3fs %6s MB/s\n' "raw pty reader (python)" "$raw" "$(mbps "$raw")"
printf '%-34s %8.3fs %6s MB/s  (%.2fx script, %.2fx raw reader)\n' "kcrash run (pty)" "$kcp" "$(mbps "$kcp")" "$(echo "$scr / $kcp" | bc -l)" "$(echo "$raw / $kcp" | bc -l)"
printf '%-34s %8.3fs %6s MB/s\n' "cat | tee /dev/null" "$tee_" "$(mbps "$tee_")"
printf '%-34s %8.3fs %6s MB/s  (%.2fx tee)\n' "kcrash run --no-pty" "$kcn" "$(mbps "$kcn")" "$(echo "$tee_ / $kcn" | bc -l)"
echo "-- the child writes to stderr"
scr_e=$(median script_e) raw_e=$(median raw_e) kcp_e=$(median kcp_e) kcn_e=$(median kcn_e)
printf '%-34s %8.3fs %6s MB/s\n' "script -qfec (>&2)" "$scr_e" "$(mbps "$scr_e")"
printf '%-34s %8.3fs %6s MB/s\n' "raw pty reader (>&2)" "$raw_e" "$(mbps "$raw_e")"
printf '%-34s %8.3fs %6s MB/s  (%.2fx script, %.2fx raw reader)\n' "kcrash run (>&2, batch: a pipe)" "$kcp_e" "$(mbps "$kcp_e")" "$(echo "$scr_e / $kcp_e" | bc -l)" "$(echo "$raw_e / $kcp_e" | bc -l)"
printf '%-34s %8.3fs %6s MB/s  (%.2fx tee)\n' "kcrash run --no-pty (>&2)" "$kcn_e" "$(mbps "$kcn_e")" "$(echo "$tee_ / $kcn_e" | bc -l)"

if command -v strace >/dev/null; then
	echo "== syscalls of a 32 MiB run (strace -c -f; futex and nanosleep are the pump's handoffs and sleeps)"
	head -c $((32 << 20)) "$tmp/data" >"$tmp/data32"
	for mode in "" --no-pty; do
		strace -c -f -o "$tmp/strace.txt" "$kc" run -q --collect never $mode -- cat "$tmp/data32" >/dev/null 2>&1 </dev/null || true
		printf '%-9s %s\n' "${mode:-pty}" "$(awk '$NF ~ /^(futex|nanosleep|read|write|epoll_pwait|total)$/ {printf "%s %s  ", $NF, $4}' "$tmp/strace.txt")"
	done
fi

echo "== memory: kcrash peak RSS (ring 16 MiB; target <= ring + 30 MiB = 46 MiB)"
for size in 100M 4G; do
	for mode in "" --no-pty; do
		rss=$(/usr/bin/time -f '%M' "$kc" run -q --collect never $mode -- head -c "$size" /dev/zero 2>&1 >/dev/null | tail -1)
		printf 'child writes %-5s %-9s peak RSS %6.1f MiB\n' "$size" "${mode:-pty}" "$(echo "$rss / 1024" | bc -l)"
	done
done
rss=$( (/usr/bin/time -f '%M' "$kc" run -q -- sh -c 'head -c 100M /dev/zero; exit 1' 2>&1 >/dev/null || true) | tail -1)
printf 'child writes 100M, crashes, bundle written: peak RSS %6.1f MiB\n' "$(echo "$rss / 1024" | bc -l)"

echo "== start-up: median of ${STARTS:-50} runs"
startups() {
	local ts=()
	for _ in $(seq "${STARTS:-50}"); do
		local a b
		a=$(now)
		"$@" >/dev/null 2>&1 </dev/null || true
		b=$(now)
		ts+=("$(echo "($b - $a) * 1000" | bc -l)")
	done
	printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
s1=$(startups script -qec true /dev/null)
s2=$(startups "$kc" run -- true)
s3=$(startups "$kc" run --collect never -- true)
printf '%-40s %7.2f ms\n' "script -qec true" "$s1" "kcrash run -- true" "$s2" "kcrash run --collect never -- true" "$s3"
printf 'kcrash adds %.2f ms over script (target <= 15 ms)\n' "$(echo "$s2 - $s1" | bc -l)"
