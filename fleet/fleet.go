// Package fleet is the pure core of a fleet of LB hosts: which probers
// probe which GSLB member (rendezvous hashing over the live probers,
// spread over locations), how the probers' votes make a fleet verdict,
// what a node's heartbeat holds, and which node of the fleet view is the
// odd one out. It does no I/O and keeps no goroutine: the etcd edge
// (package fleet/etcdfleet) stores and watches what this package
// computes with.
package fleet
