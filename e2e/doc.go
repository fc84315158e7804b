// Package e2e tests lbctl against the real daemon: its tests build lbdnsd
// and lbctl, start lbdnsd as a child process in dry-run mode (no root or
// IPVS needed) over loopback DNS servers (internal/dnstest) as back ends,
// and drive it the way an operator does: lbctl commands, signals, kill -9,
// edited configuration files, raw requests on the control socket, and GETs
// on the read-only status endpoint. What the daemon would program into
// IPVS is read from the dry-run table it writes to its state directory.
//
// The fleet's tests (fleet_test.go) run as root: three lbdnsd nodes, a
// three-member etcd and GSLB members each in a network namespace of its
// own (internal/netns), asserted with dig and lbctl fleet status; they
// skip without root, namespaces or etcd, unless LBDNS_REQUIRE_NETNS=1 or
// LBDNS_REQUIRE_ETCD=1.
//
// The package holds only tests; run them with
//
//	go test -race -count=1 ./e2e/
//
// With -race lbdnsd is built with the race detector too, and a race
// reported by a daemon fails the test that started it.
package e2e
