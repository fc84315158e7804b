// Package healthbench is the health-engine sizing benchmark: 5,000 DNS
// check targets on loopback at a 1 s interval.
//
// run.sh runs the real lbdnsd -dry-run against the responder command and
// reports the daemon's CPU time, peak RSS and the time to remove a killed
// or frozen back end. The Go benchmarks in this package run the same load
// in process, for profiling (go test -cpuprofile):
//
//	go test ./bench/health -run '^$' -bench . -benchtime 5x -cpuprofile cpu.out
//
// The package itself holds Responder, the loopback DNS back end both use.
package healthbench
