// Package check is what every health checker shares, whatever its kind:
// the Checker interface and the Result of one check. It imports nothing
// of lbdns, so that the scheduler (monitor) knows checkers without knowing
// any check kind; package probes implements the kinds.
package check

import (
	"context"
	"net/netip"
	"strconv"
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
	// Cause is CauseTarget (the zero value) for a result that is evidence
	// about the target, success or failure: a timeout, a refused or reset
	// connection, a wrong answer. Any other Cause marks a failure whose
	// reason is local to the prober (no descriptor, no buffer, no route,
	// no local address, a local firewall refusing the send): it says
	// nothing about the target, and the health tracker abstains from it
	// (see Local).
	Cause Cause
}

// Local reports whether r is a failure for a reason local to the prober
// (r.Cause is not CauseTarget): not evidence about the target.
func (r Result) Local() bool { return !r.OK && r.Cause != CauseTarget }

// Cause says whose fault a failed check is: the target's (CauseTarget), or
// which of the prober's own resources failed.
type Cause uint8

// The causes of a Result. Only CauseTarget is evidence about the target.
const (
	// CauseTarget: the result is the target's (every success, and the
	// failures the target or the network to it caused).
	CauseTarget Cause = iota
	// CauseDescriptors: the prober had no descriptor left (EMFILE,
	// ENFILE).
	CauseDescriptors
	// CauseMemory: the prober's kernel had no buffer or memory for the
	// socket or the send (ENOBUFS, ENOMEM).
	CauseMemory
	// CauseNoRoute: the prober's own routing table has no route to the
	// target (ENETUNREACH, EHOSTUNREACH raised by the local stack).
	CauseNoRoute
	// CauseAddress: no local address or port could be bound
	// (EADDRNOTAVAIL: the source address is gone, the ephemeral ports
	// are exhausted).
	CauseAddress
	// CauseForbidden: the prober's own firewall or a prohibit route
	// refused the send (EPERM, EACCES).
	CauseForbidden
)

// String returns the cause's name as metrics and status carry it:
// "target", "descriptors", "memory", "no_route", "address",
// "forbidden".
func (c Cause) String() string {
	switch c {
	case CauseTarget:
		return "target"
	case CauseDescriptors:
		return "descriptors"
	case CauseMemory:
		return "memory"
	case CauseNoRoute:
		return "no_route"
	case CauseAddress:
		return "address"
	case CauseForbidden:
		return "forbidden"
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
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
