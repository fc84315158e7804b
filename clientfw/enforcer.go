package clientfw

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"lbdns/intent"
)

// Options configure an Enforcer.
type Options struct {
	// Table is the name of lbdnsd's table (family inet). Required.
	Table string
	// NetNS, when not 0, is an open file descriptor of the network
	// namespace whose ruleset is changed (tests); 0 is the process's.
	NetNS int
	// Now is the clock the elements' timeouts are counted from. Default
	// time.Now.
	Now func() time.Time
	// MeterSize bounds each meter's source addresses. Default
	// MeterSize (tests make it small to fill it).
	MeterSize int
}

// Status is what the Enforcer last did.
type Status struct {
	// Table is the table's name.
	Table string
	// Enforced is set while the last Apply put the intent in force.
	Enforced bool
	// Error is the last Apply's error ("" when it worked).
	Error string
	// Applied is when the last Apply worked.
	Applied time.Time
	// Block and Limit count the actions in force in the kernel after the
	// last Apply that worked.
	Block, Limit int
	// Errors counts the Applies that failed; Replaced the times the
	// table was written (created, replaced or removed).
	Errors, Replaced uint64
}

// Enforcer keeps lbdnsd's nftables table equal to the client actions in
// force. Its methods are safe for concurrent use; Applies are serialised.
type Enforcer struct {
	opts Options
	mu   sync.Mutex
	st   Status
}

// New returns the enforcer of opts.
func New(opts Options) *Enforcer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MeterSize <= 0 {
		opts.MeterSize = MeterSize
	}
	return &Enforcer{opts: opts, st: Status{Table: opts.Table}}
}

// ErrPermission is wrapped by the errors of an Enforcer that may not
// change the ruleset (not root, no CAP_NET_ADMIN).
var ErrPermission = errors.New("clientfw: no permission to change the nftables ruleset (lbdnsd needs CAP_NET_ADMIN); the client actions are kept in the intent but not enforced")

// Status returns what the enforcer last did.
func (e *Enforcer) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st
}

// Apply makes the table the ruleset of the client actions in force now:
// it reads the table and, when it differs (Same), replaces it whole in
// one transaction, or removes it when no action is in force. It reports
// whether it wrote. With no action in force, a ruleset that cannot be
// read (no permission, no nf_tables) is no error: nothing is to enforce.
func (e *Enforcer) Apply(actions []intent.ClientAction) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want := Desired(actions, e.opts.Now())
	wrote, err := e.apply(want)
	if err != nil {
		e.st.Errors++
		e.st.Enforced, e.st.Error = false, err.Error()
		return false, err
	}
	if wrote {
		e.st.Replaced++
	}
	e.st.Enforced, e.st.Error, e.st.Applied = true, "", e.opts.Now()
	e.st.Block, e.st.Limit = 0, 0
	for _, s := range want.Sets {
		if s.Rate == 0 {
			e.st.Block += len(s.Elems)
		} else {
			e.st.Limit += len(s.Elems)
		}
	}
	return wrote, nil
}

func (e *Enforcer) apply(want Ruleset) (bool, error) {
	c, err := e.conn()
	if err != nil && want.Empty() {
		return false, nil // nothing to enforce, nowhere to look
	}
	if err != nil {
		return false, err
	}
	got, err := read(c, e.opts.Table)
	if err != nil && want.Empty() {
		// Nothing to enforce: a daemon without CAP_NET_ADMIN or on a
		// kernel without nf_tables needs none (a table it cannot read
		// it could not have written; its elements time out on their own).
		return false, nil
	}
	if err != nil {
		return false, e.wrap("read table", err)
	}
	if same, _ := Same(want, got); same {
		return false, nil
	}
	tbl := &nftables.Table{Name: e.opts.Table, Family: nftables.TableFamilyINet}
	if got.Present {
		c.DelTable(tbl)
	}
	if !want.Empty() {
		if err := build(c, tbl, want, e.opts.MeterSize); err != nil {
			return false, e.wrap("build table", err)
		}
	}
	if err := c.Flush(); err != nil {
		return false, e.wrap("write table", err)
	}
	return true, nil
}

// Remove deletes the table, if it is there.
func (e *Enforcer) Remove() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err := e.apply(Ruleset{})
	return err
}

// Read returns the table as the kernel has it.
func (e *Enforcer) Read() (Actual, error) {
	c, err := e.conn()
	if err != nil {
		return Actual{}, err
	}
	a, err := read(c, e.opts.Table)
	return a, e.wrap("read table", err)
}

func (e *Enforcer) conn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if e.opts.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(e.opts.NetNS))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, e.wrap("netlink", err)
	}
	return c, nil
}

// wrap names the table and turns a refusal into ErrPermission.
func (e *Enforcer) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: table inet %s: %s: %w", ErrPermission, e.opts.Table, what, err)
	}
	return fmt.Errorf("clientfw: table inet %s: %s: %w", e.opts.Table, what, err)
}

// read reads table name of family inet.
func read(c *nftables.Conn, name string) (Actual, error) {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return Actual{}, err
	}
	var tbl *nftables.Table
	for _, t := range tables {
		if t.Name == name {
			tbl = t
		}
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
