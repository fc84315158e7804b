// Package mmsg is the one layer over recvmmsg(2) and sendmmsg(2) that
// the health engine (package probes) and the GSLB responder (package
// responder) read and write datagrams with: the message headers are
// golang.org/x/sys/unix's Mmsghdr, set up once over reused buffers, and
// the senders' addresses are decoded here, and only here, from the
// kernel's socket addresses without allocating. Linux only.
package mmsg
