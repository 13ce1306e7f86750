#!/usr/bin/env bash
# Figures for the collectors, measured on this host:
#   overhead:        CPU kcrash spends while supervising `sleep $SLEEP` (default 60), every collector on
#   crash-to-bundle: from the child's abort to the bundle renamed into place, median of $N,
#                    every collector on; then again with a stand-in nvidia-smi that hangs forever
# Usage: bench/collect.sh [kcrash-binary]
. "$(dirname "$0")/lib.sh"
N=${N:-10}
SLEEP=${SLEEP:-60}

echo "== sampling overhead while supervising sleep $SLEEP (every collector watching; sleep exits 0, so no bundle)"
/usr/bin/time -f '%U %S' -o "$tmp/cpu" "$kc" run -q --out "$tmp/b0" -- sleep "$SLEEP" 2>/dev/null &
/usr/bin/time -f '%U %S' -o "$tmp/cpu0" "$kc" run -q --collect never --out "$tmp/b0" -- sleep "$SLEEP" 2>/dev/null &
wait
read -r u s <"$tmp/cpu"
read -r u0 s0 <"$tmp/cpu0"
echo "kcrash CPU, collectors watching: user ${u}s sys ${s}s = $(echo "scale=3; ($u + $s) * 100 / $SLEEP" | bc -l) % of one core (target <= 0.5 %)"
echo "kcrash CPU, --collect never:     user ${u0}s sys ${s0}s = $(echo "scale=3; ($u0 + $s0) * 100 / $SLEEP" | bc -l) % of one core"

crash_to_bundle() { # label, extra env
	local out=$tmp/b-$1 ts=()
	for i in $(seq "$N"); do
		rm -rf "$out"
		env "${@:2}" "$kc" run -q --out "$out" --collector-timeout "${TIMEOUT:-3s}" -- \
			sh -c "date +%s.%N > $tmp/t0; kill -ABRT \$\$" >/dev/null 2>&1 || true
		local t0 t1
		t0=$(cat "$tmp/t0")
		t1=$(stat -c %.9Y "$out"/kcrash-*.tar.gz)
		ts+=("$(echo "$t1 - $t0" | bc -l)")
	done
	printf '%s\n' "${ts[@]}" | sort -g | awk -v l="$1" '{a[NR]=$1} END {printf "%-28s median %.3fs  min %.3fs  max %.3fs  (n=%d)\n", l, a[int((NR+1)/2)], a[1], a[NR], NR}'
}
echo "== crash-to-bundle (child abort -> bundle in place)"
crash_to_bundle "every collector on" PATH="$PATH"
mkdir -p "$tmp/hang-bin"
printf '#!/bin/sh\nexec sleep 100000\n' >"$tmp/hang-bin/nvidia-smi"
chmod +x "$tmp/hang-bin/nvidia-smi"
crash_to_bundle "nvidia-smi hangs (timeout ${TIMEOUT:-3s})" PATH="$tmp/hang-bin:$PATH"
echo "(target: median <= 1 s; with a hung tool <= collector timeout + 1 s)"
