package configs

import (
	"net/netip"
	"strconv"
)

// interner holds one copy of each value that many tables repeat: a
// name's policies (the whole list, with its matches), its static set
// and its parsed static addresses, a pool's or a member's monitors.
// 20,000 names that differ only in their name then share one list of
// policies, as names with a service share the service's: the values
// are equal, so nothing that reads them can tell (a Config is not
// changed after Load). The zero value is ready; Load uses one and drops
// it.
type interner struct {
	policies map[string][]GSLBPolicy
	strs     map[string][]string
	addrs    map[string][]netip.Addr
	key      []byte
}

// appendText appends s to b so that no two sequences of texts give the
// same bytes: its length, ':', the text.
func appendText(b []byte, s string) []byte {
	return append(append(strconv.AppendInt(b, int64(len(s)), 10), ':'), s...)
}

// policyKey is the key of a list of policies: every policy's pool and
// match (nil and empty apart, levels sorted), in order.
func (in *interner) policyKey(ps []GSLBPolicy) []byte {
	b := strconv.AppendInt(in.key[:0], int64(len(ps)), 10)
	for i := range ps {
		p := &ps[i]
		b = appendText(append(b, 'p'), p.Pool)
		switch {
		case p.Match == nil:
			b = append(b, 'n')
		default:
			b = strconv.AppendInt(append(b, 'm'), int64(len(p.Match)), 10)
			for _, l := range sortedKeys(p.Match) {
				b = appendText(appendText(b, l), p.Match[l])
			}
		}
	}
	in.key = b
	return b
}

// policyList returns the held copy of ps (ps itself the first time);
// nil and empty lists stay as they are.
func (in *interner) policyList(ps []GSLBPolicy) []GSLBPolicy {
	if len(ps) == 0 {
		return ps
	}
	k := in.policyKey(ps)
	if held, ok := in.policies[string(k)]; ok {
		return held
	}
	if in.policies == nil {
		in.policies = map[string][]GSLBPolicy{}
	}
	in.policies[string(k)] = ps
	return ps
}

// stringsKey is the key of a list of texts.
func (in *interner) stringsKey(ss []string) []byte {
	b := strconv.AppendInt(in.key[:0], int64(len(ss)), 10)
	for _, s := range ss {
		b = appendText(b, s)
	}
	in.key = b
	return b
}

// strings returns the held copy of ss (ss itself the first time); nil
// and empty lists stay as they are.
func (in *interner) strings(ss []string) []string {
	if len(ss) == 0 {
		return ss
	}
	k := in.stringsKey(ss)
	if held, ok := in.strs[string(k)]; ok {
		return held
	}
	if in.strs == nil {
		in.strs = map[string][]string{}
	}
	in.strs[string(k)] = ss
	return ss
}

// staticAddrs returns the held copy of addrs, the addresses parsed from
// static (addrs itself the first time static is seen): equal static
// sets parse to equal addresses.
func (in *interner) staticAddrs(static []string, addrs []netip.Addr) []netip.Addr {
	if len(addrs) == 0 {
		return addrs
	}
	k := in.stringsKey(static)
	if held, ok := in.addrs[string(k)]; ok {
		return held
	}
	if in.addrs == nil {
		in.addrs = map[string][]netip.Addr{}
	}
	in.addrs[string(k)] = addrs
	return addrs
}

// name shares what name n repeats of other names: its policies and its
// static set.
func (in *interner) name(n *GSLBName) {
	n.Policies = in.policyList(n.Policies)
	n.Static = in.strings(n.Static)
}

// pools shares the monitors lists of the pools and their members.
func (in *interner) pools(ps []GSLBPool) {
	for i := range ps {
		p := &ps[i]
		p.Monitors = in.strings(p.Monitors)
		for j := range p.Members {
			p.Members[j].Monitors = in.strings(p.Members[j].Monitors)
		}
	}
}
