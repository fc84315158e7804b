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
	deadline, ok := ctx.Deadline()
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("pack query: %w", err)
	}
	for _, network := range []string{"udp", "tcp"} {
		raw, err := exchange(ctx, network, target, wire)
		if err != nil {
			return nil, errors.New(describeErr(ctx, err, deadline.Sub(start)))
		}
		if why := checkHeader(q, raw); why != "" {
			return nil, errors.New(why)
		}
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil {
			if raw[2]&0x02 != 0 && network == "udp" {
				continue // TC set and the rest cut short: ask over TCP
			}
			return nil, fmt.Errorf("malformed reply: %w", err)
		}
		if why := checkQuestion(q, r); why != "" {
			return nil, errors.New(why)
		}
		if r.Truncated && network == "udp" {
			continue
		}
		if r.Truncated {
			return nil, errors.New("truncated over tcp")
		}
		return r, nil
	}
	return nil, errors.New("unreachable") // the loop returns on tcp
}
