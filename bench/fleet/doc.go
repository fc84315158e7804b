// Package fleetbench prints the fleet's figures on loopback against a
// real three-member etcd cluster (testkit/etcdtest): how long an intent
// change takes to reach every node (3 and 5 nodes, p50 and p99: the
// stores' watches, then whole lbdnsd daemons answering from it), the
// fraction of GSLB members whose probers change when a node joins, and
// how long a node killed without a goodbye stays in the fleet view; and,
// with whole lbdnsd daemons in the test process (GSLB members on
// loopback TCP listeners the benchmark opens and closes): a member's
// death to the fleet verdict on every node's answers, a prober cut off
// from etcd losing its votes (and the other nodes' answers meanwhile),
// the assignments moved when a daemon joins, read from their monitors,
// and CPU and vote writes per node with 1,000 members. It runs only when
// LBDNS_BENCH_FLEET=1 (run.sh sets it); figures are printed, never
// judged.
package fleetbench
