// Package probes implements the health checkers of every check kind: one
// constructor per kind builds a check.Checker for one target from its
// check profile, once (names, types and expressions are parsed then, not
// per probe). Checkers do I/O only, keep no state, and take their deadline
// from the context.
//
// The DNS kind's exchange-and-validate core (ID, QR, opcode and question
// checked on every reply, UDP retried over TCP when truncated) is shared
// by the health checker, Identify and Exchange (the prefetcher), so every
// query the daemon makes is judged the same way.
package probes

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// Result is the outcome of one probe (check.Result).
type Result = check.Result

// Func is the signature of a one-off probe of a check profile, such as
// DNS. It parses the profile on every call; health checks use
// checkers made by a Builder instead.
type Func func(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result

// Deps are what the checkers of one Builder share.
type Deps struct {
	// DNS, when set, runs the UDP checks of kind "dns" through its batch
	// engine on Linux (see DNSProber); nil opens a socket per probe.
	DNS *DNSProber

	// tcp runs the connect-only tcp checks; NewBuilder makes it.
	tcp *connectEngine
}

// Constructor builds the checker of one kind for one target from its
// check profile, or says why the profile cannot be checked.
type Constructor func(chk *configs.Check, target netip.AddrPort, deps Deps) (check.Checker, error)

// Builder builds checkers by kind: adding a kind is one settings struct in
// configs and one Constructor in the table NewBuilder makes. A kind with
// facts of its own reports them in its Results (check.Fact), declares the
// metrics they are exported as beside it (FactMetrics) and, to show them
// in the monitor tables of lbctl and the status page, has a row in
// control.FactColumns.
type Builder struct {
	deps  Deps
	kinds map[string]Constructor
}

// NewBuilder returns a Builder of every kind, whose checkers share deps.
func NewBuilder(deps Deps) *Builder {
	if deps.tcp == nil {
		deps.tcp = newConnectEngine()
	}
	return &Builder{deps: deps, kinds: map[string]Constructor{
		"dns":   newDNSChecker,
		"icmp":  newICMPChecker,
		"tcp":   newTCPChecker,
		"udp":   newUDPChecker,
		"http":  newHTTPChecker,
		"https": newHTTPChecker,
	}}
}

// FactMetrics returns the metrics the kinds export their facts as (see
// check.FactMetric), each declared beside its kind.
func FactMetrics() []check.FactMetric {
	return append(httpFactMetrics(), icmpFactMetrics()...)
}

// Build returns the checker of chk's kind for target.
func (b *Builder) Build(chk *configs.Check, target netip.AddrPort) (check.Checker, error) {
	if chk == nil {
		return nil, fmt.Errorf("probes: no check profile for %s", target)
	}
	kind := chk.Kind
	if kind == "" {
		kind = configs.DefaultCheckKind
	}
	newChecker, ok := b.kinds[kind]
	if !ok {
		return nil, fmt.Errorf("probes: check %q: unknown kind %q", chk.Name, kind)
	}
	c, err := newChecker(chk, target, b.deps)
	if err != nil {
		return nil, fmt.Errorf("probes: check %q: %w", chk.Name, err)
	}
	return c, nil
}

// bounded returns ctx with its deadline: its own, or timeout from now when
// it has none (a caller outside the monitor, which always sets one); the
// returned cancel releases what it made.
func bounded(ctx context.Context, timeout time.Duration) (context.Context, time.Time, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return ctx, d, func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	d, _ := ctx.Deadline()
	return ctx, d, cancel
}
