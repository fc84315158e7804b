#!/bin/sh
# packaging/release.sh [OUT]: what an operator installs without Go, for
# amd64 and arm64, in OUT (default dist/):
#
#   lbdns_VERSION_ARCH.deb              the Debian package (build-deb.sh)
#   lbdns-VERSION-linux-ARCH.tar.gz     the same static lbdnsd and lbctl,
#                                       with the unit, man pages, example
#                                       configurations and the guides
#   SHA256SUMS                          of all of them
#
# It needs Go 1.26 (and dpkg-deb) on the machine that builds, never on the
# hosts that install: the binaries are static (CGO_ENABLED=0). VERSION is
# LBDNS_VERSION, as for build-deb.sh. ARCHES (default "amd64 arm64")
# chooses the architectures. The files' names are printed, one a line.
set -eu
cd "$(dirname "$0")/.."
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "${LBDNS_VERSION:-}" ]; then
	if git rev-parse --git-dir >/dev/null 2>&1; then
		LBDNS_VERSION=0.1.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git log -1 --format=%h)
	else
		LBDNS_VERSION=0.1.0
	fi
fi
export LBDNS_VERSION
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files=
for arch in ${ARCHES:-amd64 arm64}; do
	deb=$(DEB_ARCH=$arch packaging/build-deb.sh "$out")
	name=lbdns-$LBDNS_VERSION-linux-$arch
	root=$stage/$arch
	dpkg-deb -x "$deb" "$root"
	dir=$stage/$name
	mkdir -p "$dir/man" "$dir/systemd" "$dir/examples"
	cp "$root/usr/sbin/lbdnsd" "$root/usr/bin/lbctl" "$dir/"
	cp "$root/lib/systemd/system/lbdnsd.service" "$dir/systemd/"
	cp "$root/usr/share/man/man8/lbdnsd.8.gz" "$root/usr/share/man/man1/lbctl.1.gz" "$dir/man/"
	cp -r "$root/usr/share/doc/lbdns/examples/." "$dir/examples/"
	cp README.md CONFIGURATION.md RUNBOOK.md "$dir/"
	cp -r docs "$dir/docs"
	tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$out/$name.tar.gz" "$name"
	files="$files $(basename "$deb") $name.tar.gz"
done
# shellcheck disable=SC2086 # the file names hold no spaces
(cd "$out" && sha256sum $files >SHA256SUMS)
for f in $files SHA256SUMS; do echo "$out/$f"; done
