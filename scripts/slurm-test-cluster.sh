#!/usr/bin/env bash
# A real one-node Slurm (Debian 12 packages: slurm 22.05, munge; MariaDB +
# slurmdbd for sacct) on this host, for kcrash's Slurm tests. Run as root; no
# systemd needed. See docs: /work/shared/reference/test-infra.md §1.
#
#   scripts/slurm-test-cluster.sh up       install what is missing, write the config, start the daemons,
#                                          wait until the node is idle
#   scripts/slurm-test-cluster.sh down     cancel the test jobs, stop by pid what `up` started, and remove
#                                          what it wrote: its config files, the munge key and the
#                                          directories it created, its MariaDB database and user, the
#                                          test users, Slurm's cgroups. Debian packages it installed stay
#                                          installed (listed by `down`; apt-get purge removes them).
#   scripts/slurm-test-cluster.sh status   what runs
#
# Test users (created by `up`, removed by `down`): kcrash-job runs the tests' unprivileged jobs,
# kcrash-other owns the file a job must not be able to read ("another user's file").
#
# Environment:
#   KCRASH_SLURM_DBD=1     (default) also MariaDB + slurmdbd, so that `sacct` answers (MaxRSS, steps,
#                          DerivedExitCode); 0: no accounting (kcrash then works from scontrol alone)
#   KCRASH_SLURM_CGROUP=1  (default) task/cgroup on cgroup v1: --mem overruns end as a real OUT_OF_MEMORY;
#                          0: task/none + OverMemoryKill (the job then ends FAILED, not OUT_OF_MEMORY)
#   KCRASH_SLURM_FORCE=1   overwrite an /etc/slurm/slurm.conf this script did not write
#
# `up` records what it started and created in $STATE; `down` stops only those pids (a
# munged or MariaDB that was already running is left alone) and removes only what `up`
# created (a directory or file that was there before stays).
set -euo pipefail

STATE=/run/kcrash-slurm-test
TEST_USERS="kcrash-job kcrash-other"
MARK="# written by kcrash scripts/slurm-test-cluster.sh"
DBD=${KCRASH_SLURM_DBD:-1}
CGROUP=${KCRASH_SLURM_CGROUP:-1}

log() { printf 'slurm-test-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# running PID: the process exists and is not a zombie (daemons are reparented
# to PID 1, which, when it is not an init, may reap them late).
running() { [ -r "/proc/$1/stat" ] && ! awk '{ sub(/^.*\) /, ""); exit($1 == "Z" ? 0 : 1) }' "/proc/$1/stat" 2>/dev/null; }

alive() { [ -s "$1" ] && running "$(cat "$1")"; }

# started NAME PIDFILE: remember that we started it (for down).
started() { mkdir -p "$STATE"; echo "$2" >"$STATE/$1"; }

# created PATH...: remember paths `up` created (for down), in creation order.
created() { mkdir -p "$STATE"; printf '%s\n' "$@" >>"$STATE/created"; }

# mkdirs DIR...: create the missing ones, remembering them.
mkdirs() {
	local d
	for d in "$@"; do
		[ -d "$d" ] && continue
		mkdir -p "$d"
		created "$d"
	done
}

# fresh PATH...: files the daemons will write that are not there yet: down removes them.
fresh() {
	local f
	for f in "$@"; do [ -e "$f" ] || created "$f"; done
}

# emptydirs DIR...: directories that exist and are empty now: down empties them again.
emptydirs() {
	local d
	for d in "$@"; do
		[ -d "$d" ] && [ -z "$(ls -A "$d")" ] && { mkdir -p "$STATE" && echo "$d" >>"$STATE/empty"; }
	done
	return 0
}

# writeconf FILE: stdin into FILE; a FILE that was there before (KCRASH_SLURM_FORCE) is kept aside
# and put back by down.
writeconf() {
	if [ -e "$1" ] && ! grep -qF "$MARK" "$1" && [ ! -e "$1.kcrash-saved" ]; then
		mv "$1" "$1.kcrash-saved"
		mkdir -p "$STATE" && echo "$1" >>"$STATE/saved"
	fi
	# Ours (new, or with our mark from an earlier up): down removes it.
	[ -e "$1" ] && ! grep -qF "$MARK" "$1" || created "$1"
	cat >"$1"
}

wait_for() { # wait_for SECONDS DESCRIPTION CMD...
	local n=$(($1 * 5)) what=$2 i
	shift 2
	for ((i = 0; i < n; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	die "timed out after ${n}x0.2s waiting for $what"
}

node_idle() { [ "$(sinfo -h -N -o %T 2>/dev/null | head -1)" = idle ]; }

up() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	local t0=$SECONDS
	export DEBIAN_FRONTEND=noninteractive
	local pkgs="slurmctld slurmd slurm-client munge" missing="" p
	[ "$DBD" = 1 ] && pkgs="$pkgs slurmdbd mariadb-server"
	for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
	mkdir -p "$STATE"
	if [ -n "$missing" ]; then
		log "installing$missing"
		echo "$missing" >>"$STATE/installed"
		apt-get update -qq
		# The postinst scripts cannot start services here (policy-rc.d); we start them below.
		apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 ||
			apt-get install -y -qq --no-install-recommends $missing >/dev/null
	fi

	local conf=/etc/slurm/slurm.conf
	if [ -e $conf ] && ! grep -qF "$MARK" $conf && [ "${KCRASH_SLURM_FORCE:-0}" != 1 ]; then
		die "$conf exists and was not written by this script (KCRASH_SLURM_FORCE=1 overwrites it)"
	fi

	local H CPUS MEM
	H=$(hostname -s)
	CPUS=$(nproc)
	MEM=$(($(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo) - 1024))
	[ "$MEM" -gt 1024 ] || MEM=1024

	# A cluster an earlier `up` left behind (its `down` never ran) is adopted: its state, logs and
	# database are ours to remove.
	local adopt=0
	grep -qsF "$MARK" $conf && [ ! -s "$STATE/created" ] && adopt=1
	if [ $adopt = 1 ]; then
		for p in /var/spool/slurmctld /var/spool/slurmd /var/log/slurm/*.log /var/log/munge/munged.log /var/lib/munge/munged.seed /run/munge /run/mysqld; do
			[ -e "$p" ] && created "$p"
		done
	fi
	emptydirs /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
	mkdirs /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/log/munge /var/lib/munge
	fresh /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log /var/log/slurm/slurmdbd.log /var/log/slurm/mariadb.log \
		/var/log/slurm/jobcomp.log /var/log/munge/munged.log /var/lib/munge/munged.seed /run/munge/munged.pid \
		/run/slurmctld.pid /run/slurmd.pid /run/slurmdbd.pid
	chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
	chmod 0755 /run/munge
	if [ ! -s /etc/munge/munge.key ]; then
		created /etc/munge/munge.key
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
		chown munge:munge /etc/munge/munge.key
		chmod 0400 /etc/munge/munge.key
	fi

	local TASK PROCTRACK GATHER GATHERP
	if [ "$CGROUP" = 1 ]; then
		[ -d /sys/fs/cgroup/memory ] && grep -q ' /sys/fs/cgroup/memory cgroup ' /proc/mounts ||
			die "KCRASH_SLURM_CGROUP=1 needs the cgroup v1 memory controller at /sys/fs/cgroup/memory (KCRASH_SLURM_CGROUP=0 runs without it, and without OUT_OF_MEMORY)"
		TASK=task/cgroup PROCTRACK=proctrack/cgroup GATHER=jobacct_gather/cgroup GATHERP=NoOverMemoryKill
		writeconf /etc/slurm/cgroup.conf <<CONF
$MARK
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
CONF
	else
		TASK=task/none PROCTRACK=proctrack/linuxproc GATHER=jobacct_gather/linux GATHERP=OverMemoryKill
		rm -f /etc/slurm/cgroup.conf
	fi
	local ACCT="AccountingStorageType=accounting_storage/none"
	[ "$DBD" = 1 ] && ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost"
	# An epilog for the tests: it runs each executable in $STATE/epilog.d (the tests put
	# `kcrash collect --slurm-epilog` hooks there), else does nothing.
	writeconf /etc/slurm/kcrash-test-epilog.sh <<'EOF'
#!/bin/sh
# written by kcrash scripts/slurm-test-cluster.sh: runs the hooks tests installed, if any
# (each test its own, in epilog.d, so that two test runs against one cluster do not swap hooks)
for hook in /run/kcrash-slurm-test/epilog.d/*; do
	[ -x "$hook" ] && "$hook"
done
exit 0
EOF
	chmod 0755 /etc/slurm/kcrash-test-epilog.sh
	writeconf $conf <<CONF
$MARK
ClusterName=kcrash
SlurmctldHost=${H}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=${PROCTRACK}
TaskPlugin=${TASK}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
MpiDefault=none
ReturnToService=2
JobAcctGatherType=${GATHER}
JobAcctGatherFrequency=1
JobAcctGatherParams=${GATHERP}
${ACCT}
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
Epilog=/etc/slurm/kcrash-test-epilog.sh
MinJobAge=600
KillWait=5
InactiveLimit=0
SchedulerParameters=sched_interval=2
NodeName=${H} CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=${H} Default=YES MaxTime=INFINITE State=UP
CONF

	local u
	for u in $TEST_USERS; do
		if ! id "$u" >/dev/null 2>&1; then
			useradd --system --no-create-home --home-dir /nonexistent --shell /bin/sh --user-group "$u"
			echo "$u" >>"$STATE/users"
		fi
	done

	if ! alive /run/munge/munged.pid; then
		runuser -u munge -- /usr/sbin/munged
		started munged /run/munge/munged.pid
	fi
	wait_for 10 munged munge -n

	if [ "$DBD" = 1 ]; then
		mkdirs /run/mysqld
		chown mysql:mysql /run/mysqld
		if ! mariadb -e 'select 1' >/dev/null 2>&1; then
			setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
				--pid-file=/run/mysqld/mysqld.pid --bind-address=127.0.0.1 >/var/log/slurm/mariadb.log 2>&1 </dev/null &
			wait_for 30 mariadb mariadb -e 'select 1'
			started mariadb /run/mysqld/mysqld.pid
		fi
		if [ $adopt = 1 ] || [ -z "$(mariadb -N -e "SHOW DATABASES LIKE 'slurm_acct_db'")" ]; then
			echo 1 >"$STATE/mariadb-db"
		fi
		if [ $adopt = 1 ] || [ -z "$(mariadb -N -e "SELECT 1 FROM mysql.user WHERE user='slurm' AND host='localhost'")" ]; then
			echo 1 >"$STATE/mariadb-user"
		fi
		mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
		writeconf /etc/slurm/slurmdbd.conf <<CONF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=slurmpw
CONF
		chmod 600 /etc/slurm/slurmdbd.conf
		if ! alive /run/slurmdbd.pid; then
			slurmdbd
			started slurmdbd /run/slurmdbd.pid
		fi
		wait_for 20 slurmdbd sacctmgr -n list cluster
		sacctmgr -n list cluster format=cluster | grep -qw kcrash || sacctmgr -i add cluster kcrash >/dev/null
	fi

	if alive /run/slurmctld.pid; then
		scontrol reconfigure >/dev/null 2>&1 || true
	else
		slurmctld -c # daemonizes; -c: start with no old job records
		started slurmctld /run/slurmctld.pid
	fi
	if ! alive /run/slurmd.pid; then
		slurmd
		started slurmd /run/slurmd.pid
	fi
	wait_for 30 "node $H to be idle" node_idle
	log "up in $((SECONDS - t0))s: node $H idle, accounting $([ "$DBD" = 1 ] && echo slurmdbd || echo none), $TASK"
}

stop_pid() { # stop_pid NAME PIDFILE
	local pid i
	[ -s "$2" ] || return 0
	pid=$(cat "$2")
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		running "$pid" || {
			[ $i -lt 10 ] || log "$1 (pid $pid) took $((i / 5))s to stop"
			return 0
		}
		sleep 0.2
	done
	log "$1 (pid $pid) still running after 10s: SIGKILL"
	kill -9 "$pid" 2>/dev/null || true
}

down() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	[ -d "$STATE" ] || {
		log "nothing started by up"
		return 0
	}
	if [ -e "$STATE/slurmctld" ]; then
		scancel --quiet --full >/dev/null 2>&1 || true # the tests' leftovers (a cluster of our own)
	fi
	rm -rf "$STATE/epilog.d"
	# Our database and MariaDB user go while MariaDB still runs (ours or the host's).
	if [ -e "$STATE/mariadb-db" ] || [ -e "$STATE/mariadb-user" ]; then
		local sql=""
		[ -e "$STATE/mariadb-db" ] && sql="DROP DATABASE IF EXISTS slurm_acct_db;"
		[ -e "$STATE/mariadb-user" ] && sql="$sql DROP USER IF EXISTS 'slurm'@'localhost';"
		mariadb -e "$sql" >/dev/null 2>&1 || log "could not drop the accounting database/user (MariaDB not answering)"
	fi
	local name
	for name in slurmd slurmctld slurmdbd mariadb munged; do
		[ -e "$STATE/$name" ] || continue
		stop_pid "$name" "$(cat "$STATE/$name")"
	done
	# Slurm's cgroup v1 directories, leaf first (a step's slurmstepd may need a moment to leave).
	local i
	for ((i = 0; i < 10; i++)); do
		find /sys/fs/cgroup/*/slurm_* /sys/fs/cgroup/*/slurm -depth -type d -exec rmdir {} \; 2>/dev/null || true
		ls -d /sys/fs/cgroup/*/slurm_* /sys/fs/cgroup/*/slurm >/dev/null 2>&1 || break
		sleep 0.5
	done
	# What up created, newest first (files before the directories that hold them).
	if [ -s "$STATE/created" ]; then
		local p
		tac "$STATE/created" | while IFS= read -r p; do
			case "$p" in
			/etc/* | /var/* | /run/*) rm -rf -- "$p" ;;
			*) log "not removing $p (outside /etc, /var, /run)" ;;
			esac
		done
	fi
	if [ -s "$STATE/empty" ]; then
		local d
		while IFS= read -r d; do
			case "$d" in
			/var/spool/slurm* | /var/log/slurm) find "$d" -mindepth 1 -delete 2>/dev/null || true ;;
			esac
		done <"$STATE/empty"
	fi
	if [ -s "$STATE/saved" ]; then
		local f
		while IFS= read -r f; do
			[ -e "$f.kcrash-saved" ] && mv -f "$f.kcrash-saved" "$f"
		done <"$STATE/saved"
	fi
	if [ -s "$STATE/users" ]; then
		local u
		while IFS= read -r u; do
			pkill -KILL -u "$u" 2>/dev/null || true # a job's leftover process
			userdel "$u" 2>/dev/null || log "userdel $u failed"
			getent group "$u" >/dev/null && groupdel "$u" 2>/dev/null || true
		done <"$STATE/users"
	fi
	[ -s "$STATE/installed" ] && log "left installed (apt-get purge removes them):$(tr '\n' ' ' <"$STATE/installed")"
	rm -rf -- "$STATE"
	log "down"
}

status() {
	local f
	for f in /run/munge/munged.pid /run/mysqld/mysqld.pid /run/slurmdbd.pid /run/slurmctld.pid /run/slurmd.pid; do
		if alive $f; then echo "running: $f ($(cat $f))"; else echo "stopped: $f"; fi
	done
	ls "$STATE" 2>/dev/null | sed 's/^/started by up: /'
	sinfo -N 2>/dev/null || true
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
