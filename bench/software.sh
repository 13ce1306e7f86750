#!/usr/bin/env bash
# Figures for the software collector, measured on this host:
#   a tree of $P (default 50) Python processes importing numpy (Debian's python3
#   and python3-numpy), held $HOLD s (default 3) after the last import, then the
#   parent aborts; median of $N (default 5):
#   - crash-to-bundle (abort -> bundle in place), every collector on, against the
#     same run with --skip-collectors software (target: stays within collect.sh's
#     median <= 1 s)
#   - the software collector's own duration_ms (manifest), software.json's bytes
#     and library count, and kcrash's CPU (user+sys) over the whole run, with and
#     without the collector
# Usage: bench/software.sh [kcrash-binary]
. "$(dirname "$0")/lib.sh"
N=${N:-5}
P=${P:-50}
HOLD=${HOLD:-3}
python3=/usr/bin/python3
"$python3" -c 'import numpy' || { echo "needs python3-numpy" >&2; exit 1; }

cat >"$tmp/tree.py" <<PY
import os, subprocess, sys, time
procs = [subprocess.Popen([sys.executable, "-c", "import numpy, sys; print(1, flush=True); sys.stdin.read()"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range($P)]
for p in procs:
    p.stdout.readline()
time.sleep($HOLD)
with open("$tmp/t0", "w") as f:
    f.write("%.9f" % time.time())
os.abort()
PY

one() { # label, extra kcrash flags; prints: seconds cpu software_ms bytes libraries
	local out=$tmp/b-$1
	rm -rf "$out" "$tmp/x"
	/usr/bin/time -f '%U %S' -o "$tmp/cpu" "$kc" run -q --out "$out" "${@:2}" -- "$python3" "$tmp/tree.py" >/dev/null 2>&1 || true
	local t0 t1 u s
	t0=$(cat "$tmp/t0")
	t1=$(stat -c %.9Y "$out"/kcrash-*.tar.gz)
	read -r u s < <(tail -n 1 "$tmp/cpu") # after "Command terminated by signal 6"
	mkdir -p "$tmp/x" && tar -xzf "$out"/kcrash-*.tar.gz -C "$tmp/x"
	local sw ms=0 bytes=0 libs=0
	sw=$(echo "$tmp"/x/*/software.json)
	if [ -f "$sw" ]; then
		bytes=$(stat -c %s "$sw")
		libs=$("$python3" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["libraries"]))' "$sw")
		ms=$("$python3" -c 'import json,sys; print([c["duration_ms"] for c in json.load(open(sys.argv[1]))["collectors"] if c["name"]=="software"][0])' "$tmp"/x/*/manifest.json)
	fi
	echo "$(echo "$t1 - $t0" | bc -l) $(echo "$u + $s" | bc -l) $ms $bytes $libs"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A col
for i in $(seq "$N"); do
	# interleaved, so that drift in the machine's load hits both alike
	read -r s c ms b l < <(one on)
	col[on_s]+="$s "; col[on_cpu]+="$c "; col[on_ms]+="$ms "; col[on_b]+="$b "; col[on_l]+="$l "
	read -r s c _ _ _ < <(one off --skip-collectors software)
	col[off_s]+="$s "; col[off_cpu]+="$c "
done
m() { tr ' ' '\n' <<<"${col[$1]}" | grep . | median; }
echo "== $P Python processes importing numpy, held ${HOLD}s, then the parent aborts (median of $N)"
echo "crash-to-bundle, every collector on:        $(m on_s) s"
echo "crash-to-bundle, --skip-collectors software: $(m off_s) s   (target, bench/collect.sh: median <= 1 s)"
echo "software collector duration_ms (manifest):  $(m on_ms) ms"
echo "software.json: $(m on_b) bytes, $(m on_l) libraries"
echo "kcrash CPU over the run (user+sys): $(m on_cpu) s with the collector, $(m off_cpu) s without"
