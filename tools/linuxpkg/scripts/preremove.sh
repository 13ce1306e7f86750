#!/bin/sh
# The package going away (deb: "remove"; rpm: $1 = 0, no copy left), not an
# upgrade: the agent stops and is disabled, so no unit points at a missing
# /usr/bin/kcrash.
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now kcrash-agent.service >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
