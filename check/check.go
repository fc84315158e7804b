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
	// Facts are the facts of the check's kind that the probe found (an
	// https check's certificate days left, an icmp check's echo loss and
	// socket), in name order; nil when the kind has none.
	Facts []Fact
}

// Fact is one fact of a check kind's own found by a probe. Status, lbctl,
// the status page and the metrics carry it by its name, without knowing
// the kind (see FactMetric).
type Fact struct {
	// Name names the fact: its key in the status JSON ("cert_days_left").
	Name string
	// Value is a number fact's value; Text a text fact's ("raw"), "" for
	// a number.
	Value float64
	Text  string
}

// Lookup returns the fact named name among facts, and whether there is
// one.
func Lookup(facts []Fact, name string) (Fact, bool) {
	for _, f := range facts {
		if f.Name == name {
			return f, true
		}
	}
	return Fact{}, false
}

// FactMetric is the metric a kind exports one of its facts as, per
// monitor: the fact's value times Scale, under the labels of the
// monitor.
type FactMetric struct {
	// Fact is the fact's Name; Metric the metric's name without the
	// lbdns_ prefix; Help its help text.
	Fact, Metric, Help string
	Scale              float64
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
