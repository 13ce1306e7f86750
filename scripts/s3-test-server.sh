#!/usr/bin/env bash
# A real S3-compatible server for kcrash's S3 tests: tools/s3server (gofakes3,
# objects in memory), built from its own module and started on a free
# loopback port. It logs the access key id of every request, so that tests
# can check which credentials the AWS SDK's chain picked.
#
#   scripts/s3-test-server.sh up     build and start it; print the variables the tests read, as
#                                    export lines (eval "$(scripts/s3-test-server.sh up)"):
#                                      KCRASH_TEST_S3_ENDPOINT  http://127.0.0.1:PORT
#                                      KCRASH_TEST_S3_LOG       its request log
#   scripts/s3-test-server.sh down   stop what `up` started (by its pid) and remove its directory
#
# Environment: KCRASH_S3_STATE, the directory `up` writes (default /tmp/kcrash-s3-test-server).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${KCRASH_S3_STATE:-/tmp/kcrash-s3-test-server}

log() { printf 's3-test-server: %s\n' "$*" >&2; }

# running PID: the process exists and is not a zombie (once `up` has
# returned, the server's parent is PID 1, which may reap it late).
running() { [ -r "/proc/$1/stat" ] && ! awk '{ sub(/^.*\) /, ""); exit($1 == "Z" ? 0 : 1) }' "/proc/$1/stat" 2>/dev/null; }

up() {
	if [ -s "$STATE/pid" ] && running "$(cat "$STATE/pid")"; then
		log "already running (pid $(cat "$STATE/pid"))"
	else
		mkdir -p "$STATE"
		rm -f "$STATE/addr"
		(cd tools/s3server && CGO_ENABLED=0 go build -o "$STATE/s3server" .)
		"$STATE/s3server" -addr 127.0.0.1:0 -addr-file "$STATE/addr" -log "$STATE/requests.log" </dev/null >"$STATE/stderr" 2>&1 &
		echo $! >"$STATE/pid"
		# The server writes its address once it listens: wait for that, or for it to die.
		local i
		for ((i = 0; i < 300; i++)); do
			[ -s "$STATE/addr" ] && break
			running "$(cat "$STATE/pid")" || { cat "$STATE/stderr" >&2; log "it exited"; exit 1; }
			sleep 0.1
		done
		[ -s "$STATE/addr" ] || { log "no address after 30 s"; exit 1; }
		log "listening on $(cat "$STATE/addr") (pid $(cat "$STATE/pid"))"
	fi
	printf 'export KCRASH_TEST_S3_ENDPOINT=http://%s KCRASH_TEST_S3_LOG=%s\n' "$(cat "$STATE/addr")" "$STATE/requests.log"
}

down() {
	if [ -s "$STATE/pid" ]; then
		local pid
		pid=$(cat "$STATE/pid")
		if kill "$pid" 2>/dev/null; then
			# Wait for it to go, so that nothing is left when down returns.
			while running "$pid"; do sleep 0.1; done
		fi
	fi
	rm -rf "$STATE"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
