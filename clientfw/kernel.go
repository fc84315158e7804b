package clientfw

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Kernel is the netlink edge of an Enforcer: lbdnsd's table read,
// replaced whole and its sets counted. Netlink is the real one; tests
// inject one whose calls fail.
type Kernel interface {
	// Read returns table name (family inet) as the kernel has it.
	Read(name string) (Actual, error)
	// Replace makes table name hold want, its meters bounded to
	// meterSize sources, in one transaction: the table there is
	// deleted first when present is set; an empty want leaves none.
	Replace(name string, present bool, want Ruleset, meterSize int) error
	// Fill counts the elements of every set and meter of table name
	// (none when the table is not there).
	Fill(name string) ([]SetFill, error)
}

// SetFill is how full one set of the table is.
type SetFill struct {
	// Set is the set's name (block4, limit4_50, meter4_50, ...).
	Set string
	// Elements is the number of elements the kernel holds (an interval
	// set's prefixes, a meter's source addresses).
	Elements int
	// Capacity is the most elements the set takes (a meter's size); 0
	// for a set without a bound.
	Capacity int
}

// Netlink is the Kernel over netlink (google/nftables), in the network
// namespace NetNS (an open descriptor; 0 is the process's own).
type Netlink struct {
	NetNS int
}

func (k Netlink) conn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if k.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(k.NetNS))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return c, nil
}

// Read implements Kernel.
func (k Netlink) Read(name string) (Actual, error) {
	c, err := k.conn()
	if err != nil {
		return Actual{}, err
	}
	return read(c, name)
}

// Replace implements Kernel.
func (k Netlink) Replace(name string, present bool, want Ruleset, meterSize int) error {
	c, err := k.conn()
	if err != nil {
		return err
	}
	tbl := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
	if present {
		c.DelTable(tbl)
	}
	if !want.Empty() {
		if err := build(c, tbl, want, meterSize); err != nil {
			return fmt.Errorf("build table: %w", err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// Fill implements Kernel. It dumps every element of every set: a full
// meter of 65,535 sources is one netlink dump of a few megabytes, so
// callers bound how often they ask (the clients component every
// FillEvery).
func (k Netlink) Fill(name string) ([]SetFill, error) {
	c, err := k.conn()
	if err != nil {
		return nil, err
	}
	tbl, err := table(c, name)
	if err != nil || tbl == nil {
		return nil, err
	}
	sets, err := c.GetSets(tbl)
	if err != nil {
		return nil, fmt.Errorf("sets: %w", err)
	}
	var out []SetFill
	for _, s := range sets {
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		n := 0
		for _, el := range elems {
			if !el.IntervalEnd {
				n++
			}
		}
		out = append(out, SetFill{Set: s.Name, Elements: n, Capacity: int(s.Size)})
	}
	slices.SortFunc(out, func(a, b SetFill) int { return strings.Compare(a.Set, b.Set) })
	return out, nil
}

// table is table name of family inet, nil when it is not there.
func table(c *nftables.Conn, name string) (*nftables.Table, error) {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

// read reads table name of family inet.
func read(c *nftables.Conn, name string) (Actual, error) {
	tbl, err := table(c, name)
	if err != nil {
		return Actual{}, err
	}
	if tbl == nil {
		return Actual{Rules: -1}, nil
	}
	a := Actual{Present: true, Rules: -1}
	sets, err := c.GetSets(tbl)
	if err != nil {
		return Actual{}, fmt.Errorf("sets: %w", err)
	}
	for _, s := range sets {
		if strings.HasPrefix(s.Name, "meter") {
			a.Meters = append(a.Meters, s.Name)
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return Actual{}, fmt.Errorf("set %s: %w", s.Name, err)
		}
		set := Set{Name: s.Name, V6: s.KeyType.Name == nftables.TypeIP6Addr.Name}
		for _, el := range elems {
			if el.IntervalEnd {
				continue
			}
			set.Elems = append(set.Elems, elemOf(el))
		}
		a.Sets = append(a.Sets, set)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return Actual{}, fmt.Errorf("chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == name && ch.Name == Chain {
			rules, err := c.GetRules(tbl, ch)
			if err != nil {
				return Actual{}, fmt.Errorf("rules: %w", err)
			}
			a.Rules = len(rules)
		}
	}
	return a, nil
}

// elemOf is a kernel element: its prefix is the comment's client (an
// element lbdnsd wrote), else its key's address alone.
func elemOf(el nftables.SetElement) Elem {
	e := Elem{Comment: el.Comment, Timeout: el.Expires}
	f := strings.Fields(el.Comment)
	if len(f) == 5 && f[0] == "lbdns" {
		if p, err := netip.ParsePrefix(f[2]); err == nil {
			e.Prefix = p
		} else if ad, err := netip.ParseAddr(f[2]); err == nil {
			e.Prefix = netip.PrefixFrom(ad, ad.BitLen())
		}
	}
	if !e.Prefix.IsValid() {
		if ad, ok := netip.AddrFromSlice(el.Key); ok {
			e.Prefix = netip.PrefixFrom(ad, ad.BitLen())
		}
	}
	return e
}

// build adds table tbl holding want to c's batch. Every set gets its
// batch ID here (1, 2, ... in the batch): google/nftables would draw one
// from a package variable it increments unguarded, a data race between
// two enforcers of one process (tests run several daemons).
//
// A limit set has two rules: the first accepts a packet of a source its
// meter keeps under the rate; the second drops every other packet of the
// set's clients: those over the rate, and those of a source the meter
// could not take because it is full (meterSize sources), so that filling
// the meter with sources cannot bypass the limit (it fails closed for
// the limited clients until sources age out of it).
func build(c *nftables.Conn, tbl *nftables.Table, want Ruleset, meterSize int) error {
	var ids uint32
	nextID := func() uint32 { ids++; return ids }
	c.AddTable(tbl)
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: Chain, Table: tbl, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(Priority), Policy: &accept})
	for _, s := range want.Sets {
		key, proto, off, n := nftables.TypeIPAddr, byte(unix.NFPROTO_IPV4), uint32(12), uint32(4)
		if s.V6 {
			key, proto, off, n = nftables.TypeIP6Addr, byte(unix.NFPROTO_IPV6), 8, 16
		}
		set := &nftables.Set{Table: tbl, Name: s.Name, ID: nextID(), KeyType: key, Interval: true, HasTimeout: true}
		if err := c.AddSet(set, elements(s.Elems)); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		exprs := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		}
		if s.Rate > 0 {
			meter := &nftables.Set{Table: tbl, Name: MeterName(s.Name), ID: nextID(), KeyType: key, Dynamic: true, HasTimeout: true,
				Timeout: MeterTimeout, Size: uint32(meterSize)}
			if err := c.AddSet(meter, nil); err != nil {
				return fmt.Errorf("set %s: %w", meter.Name, err)
			}
			under := append(slices.Clone(exprs), &expr.Dynset{SrcRegKey: 1, SetName: meter.Name, SetID: meter.ID, Operation: uint32(unix.NFT_DYNSET_OP_UPDATE),
				Exprs: []expr.Any{&expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(s.Rate), Unit: expr.LimitTimeSecond}}},
				&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
			c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: under})
		}
		exprs = append(exprs, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: exprs})
	}
	return nil
}

// elements are the kernel elements of an interval set: for each prefix a
// start element with the timeout and comment, and an end element at the
// address after its last (none after the last address there is).
func elements(elems []Elem) []nftables.SetElement {
	var out []nftables.SetElement
	for _, e := range elems {
		out = append(out, nftables.SetElement{Key: e.Prefix.Addr().AsSlice(), Timeout: e.Timeout, Comment: e.Comment})
		if next := lastAddr(e.Prefix).Next(); next.IsValid() {
			out = append(out, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ad, _ := netip.AddrFromSlice(b)
	return ad
}
