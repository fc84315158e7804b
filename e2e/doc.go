// Package e2e tests lbctl against the real daemon: its tests build lbdnsd
// and lbctl, start lbdnsd as a child process in dry-run mode (no root or
// IPVS needed) over loopback DNS servers (internal/lab/dnstest) as back ends,
// and drive it the way an operator does: lbctl commands, signals, kill -9,
// edited configuration files, raw requests on the control socket, and GETs
// on the read-only status endpoint. What the daemon would program into
// IPVS is read from the dry-run table it writes to its state directory.
//
// The fleet's tests (fleet_test.go) run as root: three lbdnsd nodes, a
// three-member etcd and GSLB members each in a network namespace of its
// own (testkit/netns), asserted with dig and lbctl fleet status; they
// skip without root, namespaces or etcd, unless LBDNS_REQUIRE_NETNS=1 or
// LBDNS_REQUIRE_ETCD=1.
//
// The fault lab (faultlab_test.go) is the fleet as operators deploy it:
// three LB hosts sharing one anycast GSLB listen address, announced by
// lbdnsd's own BGP to a BIRD router that spreads clients over them by
// ECMP, under a seeded random sequence of faults (hosts cut from the
// members, from etcd or from each other, kill -9, SIGSTOP, descriptors
// exhausted, etcd compacted, members dying) while clients query and an
// operator writes intent; a checker over the whole history fails the
// test on a wrong answer, a lost acknowledged write, a refused write
// applied, or hosts that still disagree once the faults are healed, and
// prints the seed and the schedule. The suite runs one seed for 60 s;
// the long form is
//
//	LBDNS_FAULTLAB_DURATION=10m LBDNS_FAULTLAB_SEEDS=1,2,3 go test -count=1 -timeout 60m -run TestFaultLab ./e2e
//
// The package holds only tests; run them with
//
//	go test -race -count=1 ./e2e/
//
// With -race lbdnsd is built with the race detector too, and a race
// reported by a daemon fails the test that started it.
package e2e
