#!/bin/sh
# build-etcd.sh builds the etcd server the fleet tests run (see
# testkit/etcdtest) from its Go module at a pinned release, into a cache
# directory outside the repository, with etcdctl of the same release
# beside it, and prints the etcd binary's path on its first line and
# etcdctl's on the second. It is idempotent: binaries already built at
# that version are kept.
#
# Why not Debian's etcd-server: Debian 12 ships 3.4.23, which is end of
# life and lacks watch fixes (duplicated events, responses back in time,
# events lost after a compaction) that the fleet store relies on.
#
# Environment: ETCD_VERSION (default below), LBDNS_ETCD_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/lbdns). The binaries are
# $LBDNS_ETCD_CACHE/etcd-$ETCD_VERSION/etcd and .../etcdctl.
set -eu
export PATH="$PATH:/usr/local/go/bin"

ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
cache=${LBDNS_ETCD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lbdns}
dir="$cache/etcd-$ETCD_VERSION"
bin="$dir/etcd"
ctl="$dir/etcdctl"

if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}" &&
	[ -x "$ctl" ] && "$ctl" version 2>/dev/null | grep -q "etcdctl version: ${ETCD_VERSION#v}"; then
	echo "$bin"
	echo "$ctl"
	exit 0
fi

src="$dir/src"
mkdir -p "$src"
cd "$src"
# A module of its own that only calls etcd's main: go install pkg@version
# refuses the server module (its go.mod has replace directives).
cat >main.go <<'GO'
// Command etcd is the etcd server, built from its Go module for the tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
if [ ! -f go.mod ]; then
	go mod init lbdns.test/etcd >/dev/null 2>&1
fi
go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
go mod tidy >&2
CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
"$bin" --version >&2

# etcdctl: its own module, built the same way beside etcd.
ctlsrc="$dir/ctlsrc"
mkdir -p "$ctlsrc"
cd "$ctlsrc"
cat >main.go <<'GO'
// Command etcdctl is etcd's command-line client, built from its Go module.
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
)

func main() { ctlv3.MustStart() }
GO
if [ ! -f go.mod ]; then
	go mod init lbdns.test/etcdctl >/dev/null 2>&1
fi
go get "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION" >&2
go mod tidy >&2
CGO_ENABLED=0 go build -trimpath -o "$ctl.tmp" . >&2
mv "$ctl.tmp" "$ctl"
"$ctl" version >&2
echo "$bin"
echo "$ctl"
