#!/bin/sh
# build-deb.sh builds the Debian package of lbdns from this source tree:
#
#   packaging/build-deb.sh [OUTDIR]      (default OUTDIR: dist)
#
# It writes OUTDIR/lbdns_VERSION_ARCH.deb and prints its path. The package
# holds lbdnsd (/usr/sbin) and lbctl (/usr/bin), statically linked; the
# systemd unit (packaging/systemd/lbdnsd.service) and modules-load.d file;
# configs/full.toml as the conffile /etc/lbdns/lbdns.toml; the man pages;
# the README, CONFIGURATION.md, RUNBOOK.md, the operator guides (docs/*.md, in
# /usr/share/doc/lbdns/docs), example configurations, alert rules and
# Grafana dashboard in /usr/share/doc/lbdns; copyright and changelog.
# Needs go, dpkg-deb and gzip; no root (dpkg-deb --root-owner-group).
#
# Environment: LBDNS_VERSION overrides the version (default: 0.1.0~git
# followed by the commit date and hash, or 0.1.0 outside git); GOARCH, when
# set, must match DEB_ARCH (default: dpkg --print-architecture).
set -eu
cd "$(dirname "$0")/.."
out=${1:-dist}
arch=${DEB_ARCH:-$(dpkg --print-architecture)}
if [ -z "${LBDNS_VERSION:-}" ]; then
	if git rev-parse --git-dir >/dev/null 2>&1; then
		LBDNS_VERSION=0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git log -1 --format=%h)
	else
		LBDNS_VERSION=0.1.0
	fi
fi
# The changelog date is the commit's (reproducible), or now outside git.
date=$(git log -1 --format=%cD 2>/dev/null || date -R)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root/DEBIAN" "$root/usr/sbin" "$root/usr/bin" "$root/etc/lbdns" \
	"$root/lib/systemd/system" "$root/usr/lib/modules-load.d" \
	"$root/usr/share/man/man1" "$root/usr/share/man/man8" \
	"$root/usr/share/lintian/overrides" \
	"$root/usr/share/doc/lbdns/examples/monitoring" "$root/usr/share/doc/lbdns/docs"

# Static, reproducible binaries: no cgo, no build paths, no VCS stamp
# (-buildvcs=false: the tree may be a worktree or an export).
export CGO_ENABLED=0
case $arch in
amd64 | arm64 | riscv64 | ppc64el | s390x) ;;
*) echo "build-deb: architecture $arch not supported" >&2; exit 2 ;;
esac
goarch=$arch
[ "$arch" = ppc64el ] && goarch=ppc64le
# -version of both binaries says the package version and the commit (the
# build records no VCS information: -buildvcs=false keeps it reproducible).
revision=$(git rev-parse HEAD 2>/dev/null || true)
ldflags="-s -w -X lbdns/internal/buildinfo.linkVersion=$LBDNS_VERSION -X lbdns/internal/buildinfo.linkRevision=$revision"
GOARCH=$goarch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$root/usr/sbin/lbdnsd" ./cmd/lbdnsd
GOARCH=$goarch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$root/usr/bin/lbctl" ./lbctl

install -m 0644 packaging/systemd/lbdnsd.service "$root/lib/systemd/system/lbdnsd.service"
install -m 0644 packaging/modules-load.d/lbdns.conf "$root/usr/lib/modules-load.d/lbdns.conf"
install -m 0644 configs/full.toml "$root/etc/lbdns/lbdns.toml"
install -m 0644 packaging/debian/lintian-overrides "$root/usr/share/lintian/overrides/lbdns"
gzip -9n -c packaging/man/lbdnsd.8 >"$root/usr/share/man/man8/lbdnsd.8.gz"
gzip -9n -c packaging/man/lbctl.1 >"$root/usr/share/man/man1/lbctl.1.gz"

doc=$root/usr/share/doc/lbdns
install -m 0644 packaging/debian/copyright "$doc/copyright"
gzip -9n -c README.md >"$doc/README.md.gz"
gzip -9n -c CONFIGURATION.md >"$doc/CONFIGURATION.md.gz"
gzip -9n -c RUNBOOK.md >"$doc/RUNBOOK.md.gz"
for f in docs/*.md; do
	gzip -9n -c "$f" >"$doc/$f.gz"
done
for f in configs/full.toml configs/minimal.toml configs/quickstart.toml configs/gslb.toml configs/bgp.toml; do
	install -m 0644 "$f" "$doc/examples/"
done
install -m 0644 monitoring/alerts.yml monitoring/alerts_test.yml monitoring/grafana-lbdns.json "$doc/examples/monitoring/"
cat >"$stage/changelog" <<CHANGELOG
lbdns ($LBDNS_VERSION) unstable; urgency=medium

  * Build of the lbdns source tree (packaging/build-deb.sh); the changes
    are in the git history.

 -- lbdns maintainers <maintainers@lbdns.invalid>  $date
CHANGELOG
gzip -9n -c "$stage/changelog" >"$doc/changelog.gz"

for s in postinst prerm postrm; do
	install -m 0755 "packaging/debian/$s" "$root/DEBIAN/$s"
done
echo /etc/lbdns/lbdns.toml >"$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: lbdns
Version: $LBDNS_VERSION
Architecture: $arch
Maintainer: lbdns maintainers <maintainers@lbdns.invalid>
Installed-Size: $size
Depends: init-system-helpers (>= 1.52)
Recommends: ipvsadm
Section: net
Priority: optional
Description: health checks for DNS resolvers driving Linux IPVS
 lbdnsd checks the recursive resolvers behind DNS virtual IP addresses
 (BIND, Unbound, Knot Resolver, PowerDNS Recursor, dnsmasq) and programs
 the kernel's IPVS table so that only resolvers that answer correctly
 receive traffic: pools with a minimum of healthy members that fail open,
 vendor-wide and upstream failure diagnosis, operator drain and disable,
 and cache prefetch. It also monitors GSLB members and answers GSLB zones
 as an authoritative DNS server: the healthy members by the client's
 location (topology, EDNS Client Subnet, policies, pool algorithms), with
 an emergency switch to static answers and TTL raises.
 .
 lbctl shows the daemon's state, drains, disables, enables and reloads,
 explains GSLB answers and switches intelligent resolution off and on.
 The package ships a hardened systemd unit (Type=notify with a watchdog),
 Prometheus alert rules and a Grafana dashboard as examples.
CONTROL
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
find "$root" -type d -exec chmod 0755 {} +

# Reproducible: every file dated the commit's time (dpkg-deb clamps to
# SOURCE_DATE_EPOCH too).
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb=$out/lbdns_${LBDNS_VERSION}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
