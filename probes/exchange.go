package probes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Exchange sends q to target over UDP, and again over TCP when the UDP
// reply is truncated, within ctx's deadline, and returns the reply after
// the checks a probe makes on every reply: the ID matches, QR is set, the
// opcode is QUERY and the question is echoed exactly. A reply that fails
// them is an error saying why ("id mismatch: got 1, want 2", "question
// mismatch: ..."); a timeout is an error whose text is "timeout after D".
// The rcode is the caller's to judge. Other packages that query back ends
// (the prefetcher) use it so that every query the daemon makes is judged
// the same way.
func Exchange(ctx context.Context, target netip.AddrPort, q *dns.Msg) (*dns.Msg, error) {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, defaultTimeout)
	defer cancel()
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("pack query: %w", err)
	}
	r, _, detail, _ := roundTrip(ctx, target, "udp", q, wire, deadline.Sub(start))
	if r == nil {
		return nil, errors.New(detail)
	}
	return r, nil
}
