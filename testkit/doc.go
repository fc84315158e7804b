// Package testkit is the root of lbdns's test kit: the packages under it
// run the real products the tests check lbdnsd against (etcd, BIRD, FRR,
// nginx, Chromium, a kernel with IPVS in a VM, network namespaces) and the
// fakes of the pure core's tests. Only tests and benchmarks import them;
// no product package does (TestNoProductImportsTestkit).
package testkit
