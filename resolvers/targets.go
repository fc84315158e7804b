package resolvers

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/monitor"
	"lbdns/monitor/identify"
)

// MonitorKind is the monitor.Key.Kind of the health targets of resolvers.
const MonitorKind = "resolver"

// MonitorKey is the monitor's key of the health target of resolver
// checked by check profile check; TargetKeyOf is its inverse.
func MonitorKey(resolver, check string) monitor.Key {
	return monitor.Key{Kind: MonitorKind, Member: resolver, Check: check}
}

// MonitorKey returns the monitor's key of k's health target.
func (k TargetKey) MonitorKey() monitor.Key { return MonitorKey(k.Resolver, k.Check) }

// TargetKeyOf is the pool policy's key of the monitor target k, and false
// when k is not the target of a resolver (another kind of monitor).
func TargetKeyOf(k monitor.Key) (TargetKey, bool) {
	if k.Kind != MonitorKind || k.Owner != "" {
		return TargetKey{}, false
	}
	return TargetKey{Resolver: k.Member, Check: k.Check}, true
}

// BuildChecker builds the checker of one health target: a resolver's
// address checked under a check profile.
type BuildChecker func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error)

// Targets lists the health targets of cfg: one per (resolver, check) pair
// that some pool uses, keyed by MonitorKey, each with its checker built
// once by build. A target whose checker cannot be built is left out and
// named in the error; the others are returned all the same.
func Targets(cfg *configs.Config, build BuildChecker) ([]monitor.Target, error) {
	seen := map[monitor.Key]bool{}
	var out []monitor.Target
	var errs []error
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		chk := cfg.Checks[p.Check]
		for _, name := range p.Members {
			r := cfg.Resolver(name)
			if r == nil || chk == nil {
				continue
			}
			key := MonitorKey(r.Name, p.Check)
			if seen[key] {
				continue
			}
			seen[key] = true
			c, err := build(chk, r.AddrPort)
			if err != nil {
				errs = append(errs, fmt.Errorf("resolver %s, check %s: %w", r.Name, p.Check, err))
				continue
			}
			out = append(out, monitor.Target{Key: key, Addr: r.AddrPort, Checker: c, Spec: chk.ProbeIdentity(),
				Schedule: monitor.Schedule{Interval: chk.Interval.Duration, FastInterval: chk.FastInterval.Duration,
					Timeout: chk.Timeout.Duration, Rise: chk.Rise, Fall: chk.Fall}})
		}
	}
	return out, errors.Join(errs...)
}

// IdentifyTargets lists the back ends of cfg to identify: every pool
// member whose check is of kind dns with identify on, once, with the
// timeout of the first such check and its interval as the spread of the
// first tries.
func IdentifyTargets(cfg *configs.Config) []identify.Target {
	seen := map[string]bool{}
	var out []identify.Target
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		chk := cfg.Checks[p.Check]
		if chk == nil || chk.DNS == nil || (chk.DNS.Identify != nil && !*chk.DNS.Identify) {
			continue
		}
		for _, name := range p.Members {
			r := cfg.Resolver(name)
			if r == nil || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, identify.Target{Resolver: name, Addr: r.AddrPort, Vendor: r.Vendor,
				Timeout: chk.Timeout.Duration, Spread: chk.Interval.Duration})
		}
	}
	return out
}

// Statuses is what the facts are read from: the monitor, or a fake.
type Statuses interface {
	// Each calls fn with the status of every target.
	Each(fn func(monitor.TargetStatus))
}

// Facts yields the fact at now of every resolver target of src (targets of
// other kinds are skipped), without allocating per target.
func Facts(src Statuses, now time.Time) iter.Seq2[TargetKey, Fact] {
	return func(yield func(TargetKey, Fact) bool) {
		more := true
		src.Each(func(s monitor.TargetStatus) {
			if !more {
				return
			}
			if k, ok := TargetKeyOf(s.Key); ok {
				more = yield(k, factOf(s, now))
			}
		})
	}
}

// factOf turns one target's status at now into the pool policy's fact.
func factOf(s monitor.TargetStatus, now time.Time) Fact {
	return Fact{State: s.Health.State, Since: s.Health.Since, Fresh: s.Fresh(now),
		Reason: s.Health.LastReason, Failing: s.Health.ConsecutiveFail > 0 || s.Slow(now)}
}
