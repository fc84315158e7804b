// Package probes performs one health probe of one target: it does I/O only,
// keeps no state, and takes its deadline from the context.
package probes

import (
	"context"
	"net/netip"
	"time"

	"lbdns/configs"
)

// Result is the outcome of one probe.
type Result struct {
	// OK is true when the target answered as the check expects.
	OK bool
	// RTT is the time from sending the query to receiving the reply (or
	// to giving up).
	RTT time.Duration
	// Detail is a one-line reason for a failure ("rcode SERVFAIL",
	// "timeout after 1s", "question mismatch"), or a short summary of a
	// success.
	Detail string
}

// Func is the signature every probe kind shares.
type Func func(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result
