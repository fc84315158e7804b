package vip

import (
	"fmt"
	"net/netip"
	"slices"
)

// OpKind is the kind of one change to the IPVS table.
type OpKind uint8

// Kinds of change.
const (
	CreateService OpKind = iota
	UpdateService
	DeleteService
	CreateDest
	UpdateDest
	DeleteDest
)

// String returns "create-service", "update-dest" and so on.
func (k OpKind) String() string {
	switch k {
	case CreateService:
		return "create-service"
	case UpdateService:
		return "update-service"
	case DeleteService:
		return "delete-service"
	case CreateDest:
		return "create-dest"
	case UpdateDest:
		return "update-dest"
	case DeleteDest:
		return "delete-dest"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// rank is the position of a kind within one service's changes: the service
// exists before its destinations, and destinations are added and updated
// before others are removed.
func (k OpKind) rank() int {
	switch k {
	case CreateService:
		return 0
	case UpdateService:
		return 1
	case CreateDest:
		return 2
	case UpdateDest:
		return 3
	case DeleteDest:
		return 4
	}
	return 5 // DeleteService
}

// Op is one change to the IPVS table. Service carries the key and the
// scheduler (its Dests is always nil); Dest is set for destination kinds.
type Op struct {
	Kind    OpKind
	Service Service
	Dest    Destination
}

// String returns a one-line description, for example
// "create-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=100 dr".
func (o Op) String() string {
	switch o.Kind {
	case CreateService, UpdateService:
		return fmt.Sprintf("%s %s sched=%s", o.Kind, o.Service.Key, o.Service.Scheduler)
	case DeleteService:
		return fmt.Sprintf("%s %s", o.Kind, o.Service.Key)
	case DeleteDest:
		return fmt.Sprintf("%s %s -> %s", o.Kind, o.Service.Key, o.Dest.Addr)
	}
	return fmt.Sprintf("%s %s -> %s", o.Kind, o.Service.Key, o.Dest)
}

// compareOps is the order of Diff's output: all changes to services that stay
// or appear, by service key, each service's changes in rank order and its
// destinations by address; then the deletions of services that went away,
// by key.
func compareOps(a, b Op) int {
	ad, bd := a.Kind == DeleteService, b.Kind == DeleteService
	if ad != bd {
		if ad {
			return 1
		}
		return -1
	}
	if c := a.Service.Key.Compare(b.Service.Key); c != 0 {
		return c
	}
	if ra, rb := a.Kind.rank(), b.Kind.rank(); ra != rb {
		return ra - rb
	}
	return a.Dest.Addr.Compare(b.Dest.Addr)
}

// destEqual reports whether the current destination have already is what
// want asks for. A current Local method matches any wanted method (see
// Local).
func destEqual(have, want Destination) bool {
	return have.Weight == want.Weight &&
		(have.Forwarding == want.Forwarding || have.Forwarding == Local)
}

// Diff returns the operations that bring current to desired, for owned
// services only. It is pure.
//
// A service for which owned(key) is false is never touched, whether it is in
// current, in desired or in both. An owned service in current that is absent
// from desired is deleted whole (the kernel drops its destinations with it,
// so no delete-dest is emitted for it). A nil owned owns every key.
//
// The order is deterministic and safe to apply one by one: for each service
// in key order, the service is created or updated first, then its new
// destinations are created, changed ones updated, and stale ones deleted
// last (add before remove, so a service being moved from one destination to
// another never has none); the deletions of whole services come after all
// of that, in key order.
//
// Only the changed operations are sorted; unchanged services cost one map
// lookup per destination.
func Diff(current, desired Table, owned func(ServiceKey) bool) []Op {
	var ops []Op
	for key, want := range desired {
		if owned != nil && !owned(key) {
			continue
		}
		head := Service{Key: key, Scheduler: want.Scheduler}
		have, ok := current[key]
		if !ok {
			ops = append(ops, Op{Kind: CreateService, Service: head})
			for addr, d := range want.Dests {
				d.Addr = addr
				ops = append(ops, Op{Kind: CreateDest, Service: head, Dest: d})
			}
			continue
		}
		if have.Scheduler != want.Scheduler {
			ops = append(ops, Op{Kind: UpdateService, Service: head})
		}
		found := 0
		for addr, d := range want.Dests {
			hd, ok := have.Dests[addr]
			d.Addr = addr
			switch {
			case !ok:
				ops = append(ops, Op{Kind: CreateDest, Service: head, Dest: d})
			case !destEqual(hd, d):
				found++
				ops = append(ops, Op{Kind: UpdateDest, Service: head, Dest: d})
			default:
				found++
			}
		}
		if found == len(have.Dests) {
			continue // every current destination is wanted: nothing to delete
		}
		for addr, hd := range have.Dests {
			if _, ok := want.Dests[addr]; !ok {
				hd.Addr = addr
				ops = append(ops, Op{Kind: DeleteDest, Service: head, Dest: hd})
			}
		}
	}
	for key, have := range current {
		if owned != nil && !owned(key) {
			continue
		}
		if _, ok := desired[key]; !ok {
			ops = append(ops, Op{Kind: DeleteService, Service: Service{Key: key, Scheduler: have.Scheduler}})
		}
	}
	slices.SortFunc(ops, compareOps)
	return ops
}

// applyOp applies op to t in place. Destination maps reached from t are
// modified, so t must own them.
func applyOp(t Table, op Op) {
	key := op.Service.Key
	switch op.Kind {
	case CreateService, UpdateService:
		s, ok := t[key]
		if !ok {
			s = Service{Key: key, Dests: make(map[netip.AddrPort]Destination)}
		}
		s.Scheduler = op.Service.Scheduler
		t[key] = s
	case DeleteService:
		delete(t, key)
	case CreateDest, UpdateDest:
		s, ok := t[key]
		if !ok {
			return
		}
		if s.Dests == nil {
			s.Dests = make(map[netip.AddrPort]Destination)
			t[key] = s
		}
		s.Dests[op.Dest.Addr] = op.Dest
	case DeleteDest:
		if s, ok := t[key]; ok {
			delete(s.Dests, op.Dest.Addr)
		}
	}
}
