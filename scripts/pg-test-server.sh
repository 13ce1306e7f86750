#!/usr/bin/env bash
# A private PostgreSQL server (Debian's postgresql, 15 on Debian 12) for the
# fleet index's tests (fleet/index/sqlstore, cmd/kcrash TestBucketsPostgres*).
# Run as root; no systemd needed, and the cluster Debian's package may have
# created (/var/lib/postgresql) is neither used nor touched.
#
#   scripts/pg-test-server.sh up       install postgresql when missing, initdb a cluster of its own in
#                                      $STATE/data, start it on 127.0.0.1:$PORT and a unix socket in
#                                      $STATE/run, create the role and database kcrash, and print the DSN
#                                      (also in $STATE/dsn, mode 0600)
#   scripts/pg-test-server.sh down     stop that server and remove $STATE (data, socket, logs); a package
#                                      it installed stays installed (named by down)
#   scripts/pg-test-server.sh dsn      print the DSN of the running server
#   scripts/pg-test-server.sh status   what runs
#
# The tests read the DSN from KCRASH_TEST_POSTGRES_DSN (.ci/run exports it):
#   export KCRASH_TEST_POSTGRES_DSN=$(scripts/pg-test-server.sh up)
#
# Environment: KCRASH_PG_PORT (default 55432), KCRASH_PG_STATE (default /var/lib/kcrash-test-pg; outside
# $TMPDIR, which tests must leave as they found it).
#
# The server is for tests: fsync and synchronous_commit are off (a crash of the host loses the test
# data, nothing else), and the role's password is random, made by `up`.
set -euo pipefail

STATE=${KCRASH_PG_STATE:-/var/lib/kcrash-test-pg}
PORT=${KCRASH_PG_PORT:-55432}
MARK=$STATE/kcrash-test-pg # says the directory is this script's: down removes nothing else

log() { printf 'pg-test-server: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# bindir: the newest installed server's binaries.
bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
	[ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

as_pg() { runuser -u postgres -- "$@"; }

# running: the server's postmaster exists and is not a zombie (a daemon is reparented to PID 1,
# which, when it is not an init, may reap it late).
running() {
	local pid
	[ -s "$STATE/data/postmaster.pid" ] || return 1
	pid=$(head -1 "$STATE/data/postmaster.pid")
	[ -r "/proc/$pid/stat" ] && ! awk '{ sub(/^.*\) /, ""); exit($1 == "Z" ? 0 : 1) }' "/proc/$pid/stat" 2>/dev/null
}

psql_admin() { # SQL as the postgres superuser over the private socket
	as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$STATE/run" -p "$PORT" -d postgres "$@"
}

up() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	if ! BIN=$(bindir); then
		log "installing postgresql"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		# The postinst cannot start a service here (policy-rc.d), and we start our own below.
		apt-get install -y -qq --no-install-recommends postgresql >/dev/null
		BIN=$(bindir) || die "postgresql installed, but no /usr/lib/postgresql/*/bin/initdb"
		# Where the package could start Debian's own cluster (systemd, or no policy-rc.d), it is
		# stopped and kept from starting again: the tests use only ours, and CI leaves no daemon.
		if [ -d /run/systemd/system ]; then
			systemctl disable --now postgresql.service >/dev/null 2>&1 || true
		fi
		pg_lsclusters -h 2>/dev/null | while read -r ver name _ status _; do
			[ "$status" = online ] && pg_ctlcluster "$ver" "$name" stop || true
		done
		mkdir -p "$STATE" && echo postgresql >"$STATE/installed.tmp"
	fi
	if [ -e "$STATE" ] && [ ! -e "$MARK" ] && [ ! -e "$STATE/installed.tmp" ]; then
		die "$STATE exists and is not this script's: set KCRASH_PG_STATE elsewhere"
	fi
	if running; then
		cat "$STATE/dsn"
		return 0
	fi
	local t0=$SECONDS
	mkdir -p "$STATE"
	touch "$MARK"
	[ -e "$STATE/installed.tmp" ] && mv "$STATE/installed.tmp" "$STATE/installed"
	rm -rf "$STATE/data" "$STATE/run" "$STATE/log"
	install -d -o postgres -g postgres -m 0700 "$STATE/data"
	install -d -o postgres -g postgres -m 0755 "$STATE/run" "$STATE/log"
	# The superuser only over the private socket, as the postgres user (peer); everyone else by
	# password (scram) over 127.0.0.1, as nodes would connect to a site's server.
	as_pg "$BIN/initdb" -D "$STATE/data" -U postgres --auth-local=peer --auth-host=scram-sha-256 \
		--encoding=UTF8 --locale=C.UTF-8 >"$STATE/initdb.log" 2>&1 || {
		cat "$STATE/initdb.log" >&2
		die "initdb failed"
	}
	cat >>"$STATE/data/postgresql.conf" <<CONF
# scripts/pg-test-server.sh
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$STATE/run'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
CONF
	as_pg "$BIN/pg_ctl" -D "$STATE/data" -l "$STATE/log/server.log" -w -t 60 start >/dev/null || {
		tail -20 "$STATE/log/server.log" >&2
		die "the server did not start (port $PORT taken? KCRASH_PG_PORT picks another)"
	}
	local pw
	pw=$(head -c 18 /dev/urandom | base64 | tr '+/' 'xy')
	psql_admin -c "CREATE ROLE kcrash LOGIN PASSWORD '$pw'" -c "CREATE DATABASE kcrash OWNER kcrash"
	(
		umask 077
		echo "postgres://kcrash:$pw@127.0.0.1:$PORT/kcrash?sslmode=disable" >"$STATE/dsn"
	)
	log "up in $((SECONDS - t0))s: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT and $STATE/run"
	cat "$STATE/dsn"
}

down() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	if [ ! -e "$MARK" ]; then
		log "nothing started by up"
		return 0
	fi
	if running; then
		BIN=$(bindir) || die "no postgresql binaries to stop the server with"
		as_pg "$BIN/pg_ctl" -D "$STATE/data" -m fast -w -t 60 stop >/dev/null || {
			log "pg_ctl stop failed: SIGKILL"
			kill -9 "$(head -1 "$STATE/data/postmaster.pid")" 2>/dev/null || true
		}
	fi
	[ -s "$STATE/installed" ] && log "left installed (apt-get purge removes it): $(cat "$STATE/installed")"
	rm -rf -- "$STATE"
	log "down"
}

case "${1:-}" in
up) up ;;
down) down ;;
dsn)
	running || die "not running (scripts/pg-test-server.sh up starts it)"
	cat "$STATE/dsn"
	;;
status)
	if running; then echo "running: pid $(head -1 "$STATE/data/postmaster.pid"), $(cat "$STATE/dsn" | sed 's/:[^:@]*@/:***@/')"; else echo "stopped"; fi
	;;
*)
	echo "usage: $0 up|down|dsn|status" >&2
	exit 2
	;;
esac
