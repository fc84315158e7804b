// Package fleetbench prints the fleet's figures on loopback against a
// real three-member etcd cluster (internal/etcdtest): how long an intent
// change takes to reach every node (3 and 5 nodes, p50 and p99: the
// stores' watches, then whole lbdnsd daemons answering from it), the
// fraction of GSLB members whose probers change when a node joins, and
// how long a node killed without a goodbye stays in the fleet view. It
// runs only when LBDNS_BENCH_FLEET=1 (run.sh sets it); figures are
// printed, never judged.
package fleetbench
