#!/usr/bin/env bash
# systemd-root.sh builds, once, the Debian 12 root in which the package
# test boots systemd (systemd-nspawn): a minimal system with systemd and
# dbus, nothing of lbdns. The test mounts it read-only under a throwaway
# overlay, so one root serves every run.
#
# Usage: scripts/systemd-root.sh        (as root)
#
# Environment:
#   LBDNS_SYSTEMD_ROOT  where the root is (default /var/cache/lbdns-systemd-root)
#   LBDNS_DEBIAN_MIRROR the mirror debootstrap reads (default: the first of
#                       this host's apt sources, else deb.debian.org)
set -euo pipefail
root=${LBDNS_SYSTEMD_ROOT:-/var/cache/lbdns-systemd-root}
if [ -x "$root/lib/systemd/systemd" ] && [ -f "$root/.lbdns-complete" ]; then
	exit 0
fi
mirror=${LBDNS_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
	mirror=$(grep -hsoE '^URIs: *https?://[^ ]+debian/?$' /etc/apt/sources.list.d/*.sources | head -n1 | sed 's/^URIs: *//' || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
tmp=$root.partial
rm -rf "$tmp"
echo "systemd-root: debootstrap bookworm from $mirror into $root" >&2
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,procps bookworm "$tmp" "$mirror" >&2
# No getty on a console the test does not read; a quiet, quick boot.
rm -f "$tmp/etc/systemd/system/getty.target.wants/"* 2>/dev/null || true
echo lbdns-test >"$tmp/etc/hostname"
touch "$tmp/.lbdns-complete"
rm -rf "$root"
mv "$tmp" "$root"
