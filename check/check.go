// Package check is what every health checker shares, whatever its kind:
// the Checker interface and the Result of one check. It imports nothing
// of lbdns, so that the scheduler (monitor) knows checkers without knowing
// any check kind; package probes implements the kinds.
package check

import (
	"context"
	"net/netip"
	"time"
)

// Result is the outcome of one check.
type Result struct {
	// OK is true when the target answered as the check expects.
	OK bool
	// RTT is the time from sending the request to receiving the reply (or
	// to giving up).
	RTT time.Duration
	// Detail is a one-line reason for a failure ("rcode SERVFAIL",
	// "timeout after 1s", "question mismatch"), or a short summary of a
	// success.
	Detail string
	// Sent is the number of echo requests an icmp check sent (0 for other kinds).
	Sent int
	// Recv is the number of those echo requests answered (icmp checks).
	Recv int
	// Loss is the percentage of echo requests not answered (icmp checks).
	Loss float64
	// Socket is the kind of ICMP socket an icmp check used: "raw" or
	// "unprivileged" ("" for other kinds).
	Socket string
	// CertDaysLeft is the whole days until the server's certificate expires (negative: expired); https checks only, nil otherwise.
	CertDaysLeft *int
}

// Checker checks one target: it is built once per target from its
// settings (names, types and expressions parsed then), does I/O only,
// keeps no health state, and takes its deadline from ctx. Check must be
// safe for concurrent use.
type Checker interface {
	Check(ctx context.Context) Result
}

// Addressed is a Checker that says which address it probes: its
// target's address with the port its kind and settings give (a tcp or udp
// check's port, 80 or 443 for http and https; port 0 for icmp, which has
// none). Logs, events and status show that address.
type Addressed interface {
	ProbeAddr() netip.AddrPort
}

// Func adapts a function to a Checker.
type Func func(ctx context.Context) Result

// Check calls f.
func (f Func) Check(ctx context.Context) Result { return f(ctx) }
