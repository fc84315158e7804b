package clientfw

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/intent"
)

// Options configure an Enforcer.
type Options struct {
	// Table is the name of lbdnsd's table (family inet). Required.
	Table string
	// NetNS, when not 0, is an open file descriptor of the network
	// namespace whose ruleset is changed (tests); 0 is the process's.
	// Kernel, when set, is used instead.
	NetNS int
	// Kernel is the netlink edge. Default Netlink{NetNS}.
	Kernel Kernel
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
	// Unremoved are the actions no longer in force whose kernel
	// elements could not be removed (the last Apply failed): the kernel
	// may still drop or limit their clients' packets until each one's
	// Until, when its element times out. Empty after an Apply that
	// worked.
	Unremoved []intent.ClientAction
	// Fill is how full each set and meter of the table was when last
	// counted (Measure; a write of the table counts its sets and starts
	// its meters empty); nil before, and while the table cannot be read.
	Fill []SetFill
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
	// held are the actions whose elements the kernel may hold: those of
	// the last Apply that worked (the kernel's table is then exactly
	// them), or, before any worked, those of the first Apply (a table
	// an earlier lbdnsd wrote outlives it). A failed Apply changes
	// nothing in the kernel, so it leaves held as it is.
	held []intent.ClientAction
	// want are the actions in force of the last Apply.
	want []intent.ClientAction
	// ruleset is the table of the last Apply that worked.
	ruleset Ruleset
	// tried is set once an Apply ran.
	tried bool
}

// New returns the enforcer of opts.
func New(opts Options) *Enforcer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MeterSize <= 0 {
		opts.MeterSize = MeterSize
	}
	if opts.Kernel == nil {
		opts.Kernel = Netlink{NetNS: opts.NetNS}
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
	st := e.st
	st.Unremoved = Unremoved(e.held, e.want, e.opts.Now())
	return st
}

// Unremoved are the actions of held that the kernel may still enforce
// at now though they are not in inForce: each until its Until (its
// element's timeout). An action of inForce with the same element
// (client, action, rate and expiry: its comment) is not unremoved.
func Unremoved(held, inForce []intent.ClientAction, now time.Time) []intent.ClientAction {
	var out []intent.ClientAction
	for _, h := range held {
		if !h.Until.After(now) {
			continue
		}
		c := Comment(h)
		if slices.ContainsFunc(inForce, func(a intent.ClientAction) bool { return Comment(a) == c }) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// Apply makes the table the ruleset of the client actions in force now:
// it reads the table and, when it differs (Same), replaces it whole in
// one transaction, or removes it when no action is in force. It reports
// whether it wrote. With no action in force and none whose element the
// kernel may still hold, a ruleset that cannot be read (no permission,
// no nf_tables) is no error: nothing is to enforce.
func (e *Enforcer) Apply(actions []intent.ClientAction) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opts.Now()
	live := inForceAt(actions, now)
	if !e.tried {
		e.tried, e.held = true, live
	}
	e.want = live
	want := Desired(live, now)
	wrote, err := e.apply(want, len(Unremoved(e.held, live, now)) > 0)
	if err != nil {
		e.st.Errors++
		e.st.Enforced, e.st.Error = false, err.Error()
		return false, err
	}
	if wrote {
		e.st.Replaced++
		e.st.Fill = fillOf(want, e.opts.MeterSize)
	}
	e.held = live
	e.ruleset = want
	e.st.Enforced, e.st.Error, e.st.Applied = true, "", now
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

// inForceAt are the actions of actions that have not ended at now.
func inForceAt(actions []intent.ClientAction, now time.Time) []intent.ClientAction {
	var out []intent.ClientAction
	for _, a := range actions {
		if a.Until.After(now) {
			out = append(out, a)
		}
	}
	return out
}

// apply brings the kernel's table to want. stale says that the kernel
// may hold elements want has not: a table that cannot be read is then
// an error even when want is empty.
func (e *Enforcer) apply(want Ruleset, stale bool) (bool, error) {
	got, err := e.opts.Kernel.Read(e.opts.Table)
	if err != nil && want.Empty() && !stale {
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
	if err := e.opts.Kernel.Replace(e.opts.Table, got.Present, want, e.opts.MeterSize); err != nil {
		return false, e.wrap("", err)
	}
	return true, nil
}

// Remove deletes the table, if it is there.
func (e *Enforcer) Remove() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err := e.apply(Ruleset{}, false)
	return err
}

// Read returns the table as the kernel has it.
func (e *Enforcer) Read() (Actual, error) {
	a, err := e.opts.Kernel.Read(e.opts.Table)
	return a, e.wrap("read table", err)
}

// Measure counts the elements of the table's sets and meters into
// Status.Fill. The kernel is asked only while the table has a meter
// (Kernel.Fill dumps every element, so callers bound how often they
// measure); the block and limit sets alone are what the last Apply
// wrote. A count that fails leaves Fill empty.
func (e *Enforcer) Measure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ruleset.hasMeter() {
		e.st.Fill = fillOf(e.ruleset, e.opts.MeterSize)
		return nil
	}
	f, err := e.opts.Kernel.Fill(e.opts.Table)
	if err != nil {
		e.st.Fill = nil
		return e.wrap("count elements", err)
	}
	e.st.Fill = f
	return nil
}

// hasMeter reports whether r has a limit set (and so a meter).
func (r Ruleset) hasMeter() bool {
	return slices.ContainsFunc(r.Sets, func(s Set) bool { return s.Rate > 0 && len(s.Elems) > 0 })
}

// fillOf is how full r's table is just after it was written: its sets
// hold their elements, its meters (of meterSize sources) none. An empty
// r has no table, hence no set.
func fillOf(r Ruleset, meterSize int) []SetFill {
	if r.Empty() {
		return nil
	}
	var out []SetFill
	for _, s := range r.Sets {
		out = append(out, SetFill{Set: s.Name, Elements: len(s.Elems)})
		if s.Rate > 0 {
			out = append(out, SetFill{Set: MeterName(s.Name), Capacity: meterSize})
		}
	}
	slices.SortFunc(out, func(a, b SetFill) int { return strings.Compare(a.Set, b.Set) })
	return out
}

// wrap names the table and the step what (none when empty) and turns a
// refusal into ErrPermission.
func (e *Enforcer) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if what != "" {
		err = fmt.Errorf("%s: %w", what, err)
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: table inet %s: %w", ErrPermission, e.opts.Table, err)
	}
	return fmt.Errorf("clientfw: table inet %s: %w", e.opts.Table, err)
}
