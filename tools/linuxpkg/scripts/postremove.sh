#!/bin/sh
# deb purge: the agent's journal of kernel records goes too. Bundles
# (/var/log/kcrash, or a configured out:) are crash evidence and stay.
case "$1" in
purge) rm -rf /var/lib/kcrash ;;
esac
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
