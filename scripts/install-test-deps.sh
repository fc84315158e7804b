#!/bin/sh
# install-test-deps.sh installs the real DNS resolver products and tools that
# lbdns tests run against (see internal/lab/vendors), and Debian's Chromium with a
# font for the tests that load pages in a headless browser (see
# testkit/browser). It is idempotent: packages already installed are left
# alone, and apt-get update runs at most once. Last, it builds the etcd
# server the fleet tests run (scripts/build-etcd.sh: from etcd's Go module
# into the cache directory; Debian's etcd-server 3.4 is end of life).
#
# Debian installs would normally start bind9, unbound, dnsmasq and
# pdns-recursor as services on port 53. Tests never use port 53, but to keep
# the host clean this script blocks service starts during the install
# (policy-rc.d) and afterwards stops any of those services that still run.
#
# Usage: install-test-deps.sh [--quickstart] [--list]
#
#   --quickstart  only what the quick start runs (cmd/lbdns-quickstart): the
#                 five resolver products and dig for its walk-through. On a
#                 Debian 12 base system (priority required and important)
#                 apt fetches 63 packages, 37.1 MB, 154 MB on disk; the whole
#                 test toolchain is 387 packages, 283 MB (1.27 GB on disk).
#   --list        print the packages that would be installed and exit.
set -eu

QUICKSTART_PKGS="unbound bind9 knot-resolver pdns-recursor dnsmasq bind9-dnsutils"
PKGS="unbound bind9 knot-resolver pdns-recursor dnsmasq dnsperf bind9-dnsutils knot-dnsutils chromium fonts-dejavu-core nftables nginx-light"
# lintian and promtool (package prometheus): the package and alert-rule
# tests (packaging/, monitoring/).
PKGS="$PKGS lintian prometheus"
# BIRD 2 and FRR: the routers the BGP announcer's tests peer with (announce/),
# each started by the tests in its own network namespace.
PKGS="$PKGS bird2 frr"
# socat: relays BIND's dnstap Unix socket to the intake's TCP listener, as
# on a resolver host apart from lbdnsd (dnstap/intake).
PKGS="$PKGS socat"
# systemd-nspawn and debootstrap: the package test boots systemd on a
# Debian 12 root (scripts/systemd-root.sh builds it once) and installs the
# package there as an operator would (packaging/).
PKGS="$PKGS systemd-container debootstrap"

list=0
for arg in "$@"; do
	case "$arg" in
	--quickstart) PKGS=$QUICKSTART_PKGS ;;
	--list) list=1 ;;
	*)
		echo "install-test-deps: unknown argument $arg (want --quickstart, --list)" >&2
		exit 2
		;;
	esac
done
if [ "$list" -eq 1 ]; then
	echo "$PKGS"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi

# check_port53 warns if anything listens on port 53: tests never use it, but
# a resolver service left running there is not ours to keep.
check_port53() {
	if command -v ss >/dev/null 2>&1; then
		busy=$(ss -Hlnptu 'sport = :53' 2>/dev/null || true)
		if [ -n "$busy" ]; then
			echo "install-test-deps: warning: something listens on port 53 (tests do not need it):" >&2
			echo "$busy" >&2
		fi
	fi
}

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

# build_etcd builds (or finds already built) the etcd of the fleet tests.
build_etcd() {
	"$(dirname "$0")/build-etcd.sh" >/dev/null
	echo "install-test-deps: etcd ready ($("$(dirname "$0")/build-etcd.sh"))"
	if [ "$(id -u)" -eq 0 ] && command -v debootstrap >/dev/null 2>&1; then
		"$(dirname "$0")/systemd-root.sh"
		echo "install-test-deps: systemd root ready (${LBDNS_SYSTEMD_ROOT:-/var/cache/lbdns-systemd-root})"
	fi
}

if [ -z "$missing" ]; then
	echo "install-test-deps: all packages already installed"
	check_port53
	build_etcd
	exit 0
fi
echo "install-test-deps: installing:$missing"

# apt_retry runs an apt-get command, waiting for another apt/dpkg process that
# holds the lock (up to about 10 minutes) instead of failing at once.
apt_retry() {
	i=0
	while :; do
		if $SUDO apt-get -o DPkg::Lock::Timeout=60 "$@"; then
			return 0
		fi
		i=$((i + 1))
		if [ "$i" -ge 10 ]; then
			echo "install-test-deps: apt-get $* failed $i times" >&2
			return 1
		fi
		echo "install-test-deps: apt-get failed (lock held?), retry $i in 10 s" >&2
		sleep 10
	done
}

# Block service starts during the install unless a policy already exists.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	added_policy=1
fi
cleanup() {
	if [ "$added_policy" -eq 1 ]; then
		$SUDO rm -f "$policy"
	fi
}
trap cleanup EXIT

# Update the package lists once, only if they are missing or older than a day.
lists=/var/lib/apt/lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	apt_retry update
fi

# shellcheck disable=SC2086 # word splitting of the package list is intended
apt_retry install -y --no-install-recommends $missing

# Stop any service an install may still have started, so nothing we installed
# sits on port 53.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	for s in bind9 named unbound dnsmasq pdns-recursor kresd@1 bird frr; do
		$SUDO systemctl stop "$s" 2>/dev/null || true
	done
fi

check_port53
build_etcd
echo "install-test-deps: done"
