#!/bin/sh
# kcrash's Slurm epilog: bundles a job that ended in a failed state on this
# node (`kcrash collect --slurm-epilog`; see `kcrash collect --help` and
# docs/install.md). slurmd runs it as root, with no PATH, on every node of a
# job when the job ends:
#
#   Epilog=/usr/libexec/kcrash/kcrash-epilog.sh
#
# or, next to an epilog the site already has, called at the end of that one
# or linked into an Epilog=/etc/slurm/epilog.d/* directory.
#
# It never fails the epilog: an epilog that exits non-zero drains the node,
# so whatever happens (no kcrash, kcrash killed at the time limit) it says so
# on stderr and exits 0. kcrash itself keeps within --epilog-timeout (30 s)
# and logs into <out>/kcrash-epilog.log; the limit here is for a kcrash that
# hangs regardless.
#
# Bundles go to /var/log/kcrash unless /etc/kcrash/config.yaml (or the file
# $KCRASH_CONFIG names) says `out: DIR`. $KCRASH_BIN overrides which kcrash.

# slurmd gives epilogs no PATH: timeout(1) is found in the usual places
# (kcrash finds scontrol and sacct itself).
if [ -z "${PATH:-}" ]; then
	PATH=/usr/sbin:/usr/bin:/sbin:/bin
	export PATH
fi

if [ -z "${KCRASH_CONFIG:-}" ] && [ -r /etc/kcrash/config.yaml ]; then
	KCRASH_CONFIG=/etc/kcrash/config.yaml
	export KCRASH_CONFIG
fi

kcrash=${KCRASH_BIN:-}
if [ -z "$kcrash" ]; then
	for k in /usr/bin/kcrash /usr/local/bin/kcrash; do
		if [ -x "$k" ]; then
			kcrash=$k
			break
		fi
	done
fi
if [ -z "$kcrash" ] || [ ! -x "$kcrash" ]; then
	echo "kcrash-epilog: no kcrash at ${kcrash:-/usr/bin/kcrash or /usr/local/bin/kcrash}; job ${SLURM_JOB_ID:-?} not checked" >&2
	exit 0
fi

if command -v timeout >/dev/null 2>&1; then
	timeout -k 5 90 "$kcrash" collect --slurm-epilog
else
	"$kcrash" collect --slurm-epilog
fi
rc=$?
if [ "$rc" -ne 0 ]; then
	echo "kcrash-epilog: $kcrash collect --slurm-epilog exited $rc (job ${SLURM_JOB_ID:-?}); the epilog succeeds regardless" >&2
fi
exit 0
