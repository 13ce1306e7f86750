#!/usr/bin/env bash
# What the default profile costs a job: a CPU torch loop (the test model of
# cmd/kcrash/testdata/tinymodel, whose 12 ops per forward call write SGLang's
# kernel-API log format through the stand-in logger kapilog.py) over $BATCHES
# batches of $M rows (default 500 x 4: 6,000 kernel-API calls), timed as
#   bare            python3 run_model.py ... (no kcrash, no logging)
#   level 3 by hand the logger alone: SGLANG_KERNEL_API_LOGLEVEL=3 and a log
#                   file set in the environment, no kcrash
#   profile none    kcrash run --profile none (supervision alone)
#   default         kcrash run (profile sglang: level-3 logging into the work
#                   directory, which kcrash tails, plus faulthandler and
#                   kcrash's sitecustomize)
#   level 1         kcrash run --level 1 (one header line per call)
#   level 5         kcrash run --level 5 (tensor statistics; LEVEL5=0 skips it)
# one run of each per round, REPS rounds (default 5), stdout to /dev/null and
# stdin from /dev/null as in a batch job. Each row: median wall time and its
# ratio to bare, median CPU (user+sys of kcrash and the child, which
# /usr/bin/time counts together) and its ratio, the kernel-API log's bytes per
# run and per call, and what logging adds per call (CPU, then wall): over bare
# for the logger by hand, over profile none for the kcrash rows, so that
# kcrash's supervision (a cost per run, printed below the table) is not spread
# over the calls.
# The ratios hold for this model only: its ops take microseconds on a CPU, so
# logging dominates them. The per-call figure is the one to carry over: levels
# 1 and 3 only format metadata on the host, so a GPU model pays about that per
# call on a larger base; level 5's statistics read tensors back (.item()), which
# on a GPU also waits for the kernel. The logger is kcrash's stand-in of
# SGLang's (same format and handler), not SGLang itself.
# Usage: bench/profile.sh [kcrash-binary]   (builds one when not given)
#        REPS=5 BATCHES=500 M=4 LEVEL5=1 by default (2.5 minutes on a busy
#        2-core machine); REPS=1 BATCHES=100 for a quick look.
# Run it on an idle machine: under load the wall times carry the scheduler's
# waits, and only the CPU column stays comparable.
. "$(dirname "$0")/lib.sh"
reps=${REPS:-5}
batches=${BATCHES:-500}
m=${M:-4}
python3=/usr/bin/python3 # Debian's, with python3-torch
"$python3" -c 'import torch' 2>/dev/null || { echo "needs $python3 with torch (apt-get install python3-torch)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 1; }

# A copy of the model, so that Python's __pycache__ lands in the scratch dir.
cp cmd/kcrash/testdata/tinymodel/*.py "$tmp/"
sizes=$(printf "$m,%.0s" $(seq "$batches"))
sizes=${sizes%,}
model=("$python3" "$tmp/run_model.py" default "$sizes")
export KCRASH_OUT=$tmp/bundles
"${model[@]}" >/dev/null # warm the page cache (torch's libraries) for every tool alike

declare -A wall cpu logb calls
once() { # label workdir cmd...: one timed run; the kernel-API log, if any, is in workdir
	local w=$2
	mkdir -p "$w"
	(cd "$tmp" && /usr/bin/time -f '%e %U %S' -o "$tmp/time" "${@:3}" >/dev/null 2>"$tmp/stderr" </dev/null) ||
		{ echo "$1 failed:" >&2; cat "$tmp/stderr" >&2; exit 1; }
	local e u s
	read -r e u s <"$tmp/time"
	wall[$1]+="$e "
	cpu[$1]+="$(echo "$u + $s" | bc -l) "
	local logs=("$w"/sglang_kernel_api_*.log)
	if [[ -e ${logs[0]} ]]; then
		logb[$1]=$(cat "${logs[@]}" | wc -c)
		calls[$1]=$(cat "${logs[@]}" | grep -c 'SGLang Kernel API Call' || true)
	fi
	rm -rf "$w"
}
labels=(bare byhand none default level1)
[[ ${LEVEL5:-1} == 1 ]] && labels+=(level5)
for r in $(seq "$reps"); do
	# Kernel-API log files are named by pid; each run gets its own work directory.
	once bare "$tmp/w" "${model[@]}"
	once byhand "$tmp/w" env SGLANG_KERNEL_API_LOGLEVEL=3 SGLANG_KERNEL_API_LOGDEST="$tmp/w/sglang_kernel_api_%i.log" "${model[@]}"
	once none "$tmp/w" "$kc" run -q --profile none --workdir "$tmp/w" -- "${model[@]}"
	once default "$tmp/w" "$kc" run -q --workdir "$tmp/w" -- "${model[@]}"
	once level1 "$tmp/w" "$kc" run -q --level 1 --workdir "$tmp/w" -- "${model[@]}"
	[[ ${LEVEL5:-1} == 1 ]] && once level5 "$tmp/w" "$kc" run -q --level 5 --workdir "$tmp/w" -- "${model[@]}"
	echo "round $r of $reps done" >&2
done
if [[ -n $(ls -A "$KCRASH_OUT" 2>/dev/null) ]]; then
	echo "a run wrote a bundle (it should have exited 0): $(ls "$KCRASH_OUT")" >&2
	exit 1
fi

median() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A name=(
	[bare]="bare python3 run_model.py"
	[byhand]="level 3 by hand (no kcrash)"
	[none]="kcrash run --profile none"
	[default]="kcrash run (default: sglang, level 3)"
	[level1]="kcrash run --level 1"
	[level5]="kcrash run --level 5"
)
# The calls are counted in the default run's log (12 per forward call: 2
# layers of rms_norm twice, qkv_proj, qk_norm, gate_up, down_proj); every
# logging run must have logged as many.
n=${calls[default]}
med() { # label: median wall and CPU of label's runs
	w=$(median "${wall[$1]}") c=$(median "${cpu[$1]}")
}
med bare
bw=$w bc_=$c
med none
nw=$w nc=$c
echo "== $batches forward calls of M=$m rows ($n kernel-API calls), median of $reps, tools interleaved"
printf '%-38s %8s %6s %8s %6s %10s %7s %10s %10s\n' "" wall ratio CPU ratio "log B/run" B/call "us/call" "us/call"
printf '%-38s %8s %6s %8s %6s %10s %7s %10s %10s\n' "" "" "" "" "" "" "" "(CPU)" "(wall)"
for l in "${labels[@]}"; do
	med "$l"
	b=${logb[$l]:-0} k=${calls[$l]:-0}
	if ((k > 0 && k != n)); then
		echo "$l: the log holds $k calls, want $n" >&2
		exit 1
	fi
	bpc=- uc=- uw=-
	if ((k > 0)); then
		# What logging adds per call: over bare for the logger alone, over
		# profile none (kcrash's supervision, a cost per run) under kcrash.
		bpc=$((b / k)) b0c=$nc b0w=$nw
		[[ $l == byhand ]] && b0c=$bc_ b0w=$bw
		uc=$(printf '%.1f' "$(echo "($c - $b0c) * 1000000 / $n" | bc -l)")
		uw=$(printf '%.1f' "$(echo "($w - $b0w) * 1000000 / $n" | bc -l)")
	fi
	printf '%-38s %7.2fs %5.2fx %7.2fs %5.2fx %10s %7s %10s %10s\n' "${name[$l]}" "$w" "$(echo "$w / $bw" | bc -l)" \
		"$c" "$(echo "$c / $bc_" | bc -l)" "$b" "$bpc" "$uc" "$uw"
done
printf 'us/call: what logging adds per kernel-API call, over bare for the logger by hand and over\n'
printf 'profile none under kcrash. kcrash supervision alone (none - bare): %+.2fs CPU, %+.2fs wall per run.\n' \
	"$(echo "$nc - $bc_" | bc -l)" "$(echo "$nw - $bw" | bc -l)"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
