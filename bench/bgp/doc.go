// Package bgpbench measures the route announcer against BIRD 2 in a
// network namespace: from a serving verdict turning dead to the route
// gone from the router's table, from kill -9 of the speaker's process to
// the route gone, and from the speaker's host going silent to the route
// gone (hold time 3 s / keepalive 1 s, and with BFD), and the client
// queries lost when one of two LB hosts announcing a VIP (ECMP,
// testkit/ecmp) loses its pool. It has no code of its own; run it
// with
//
//	go test -tags bgpbench -v ./bench/bgp
package bgpbench
