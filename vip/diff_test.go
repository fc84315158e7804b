package vip

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

func key(s string, proto Protocol) ServiceKey {
	ap := netip.MustParseAddrPort(s)
	return ServiceKey{Addr: ap.Addr(), Port: ap.Port(), Proto: proto}
}

func dest(s string, w uint32, f Forwarding) Destination {
	return Destination{Addr: netip.MustParseAddrPort(s), Weight: w, Forwarding: f}
}

func svc(k ServiceKey, sched string, ds ...Destination) Service {
	s := Service{Key: k, Scheduler: sched, Dests: make(map[netip.AddrPort]Destination)}
	for _, d := range ds {
		s.Dests[d.Addr] = d
	}
	return s
}

func table(ss ...Service) Table {
	t := make(Table)
	for _, s := range ss {
		t[s.Key] = s
	}
	return t
}

func opStrings(ops []Op) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.String()
	}
	return out
}

var (
	kU = key("192.0.2.1:53", UDP)
	kT = key("192.0.2.1:53", TCP)
	k6 = key("[2001:db8::1]:53", UDP)
	kX = key("192.0.2.9:80", TCP) // someone else's
)

func TestDiff(t *testing.T) {
	notX := func(k ServiceKey) bool { return k != kX }
	tests := []struct {
		name             string
		current, desired Table
		owned            func(ServiceKey) bool
		want             []string
	}{
		{
			name: "empty to empty",
			want: []string{},
		},
		{
			name:    "create service then its dests in address order",
			desired: table(svc(kU, "wrr", dest("10.0.0.2:53", 1, DirectRoute), dest("10.0.0.1:53", 100, DirectRoute))),
			want: []string{
				"create-service udp/192.0.2.1:53 sched=wrr",
				"create-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=100 dr",
				"create-dest udp/192.0.2.1:53 -> 10.0.0.2:53 w=1 dr",
			},
		},
		{
			name:    "matching tables give nothing",
			current: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, NAT))),
			desired: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, NAT))),
			want:    []string{},
		},
		{
			name:    "weight change is one update",
			current: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, NAT), dest("10.0.0.2:53", 1, NAT))),
			desired: table(svc(kU, "wrr", dest("10.0.0.1:53", 0, NAT), dest("10.0.0.2:53", 1, NAT))),
			want:    []string{"update-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=0 nat"},
		},
		{
			name:    "forwarding change is an update",
			current: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, NAT))),
			desired: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, Tunnel))),
			want:    []string{"update-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=1 tunnel"},
		},
		{
			name:    "kernel-reported local matches any method",
			current: table(svc(kU, "wrr", dest("127.0.0.2:53", 1, Local))),
			desired: table(svc(kU, "wrr", dest("127.0.0.2:53", 1, NAT))),
			want:    []string{},
		},
		{
			name:    "scheduler change, replace a dest: add before remove",
			current: table(svc(kU, "rr", dest("10.0.0.1:53", 1, DirectRoute))),
			desired: table(svc(kU, "wrr", dest("10.0.0.2:53", 1, DirectRoute))),
			want: []string{
				"update-service udp/192.0.2.1:53 sched=wrr",
				"create-dest udp/192.0.2.1:53 -> 10.0.0.2:53 w=1 dr",
				"delete-dest udp/192.0.2.1:53 -> 10.0.0.1:53",
			},
		},
		{
			name:    "service gone is deleted whole, after other changes",
			current: table(svc(kU, "wrr", dest("10.0.0.1:53", 1, NAT)), svc(kT, "wrr", dest("10.0.0.1:53", 1, NAT))),
			desired: table(svc(kT, "wrr", dest("10.0.0.1:53", 2, NAT))),
			want: []string{
				"update-dest tcp/192.0.2.1:53 -> 10.0.0.1:53 w=2 nat",
				"delete-service udp/192.0.2.1:53",
			},
		},
		{
			name:    "services in key order: v4 before v6, tcp before udp",
			desired: table(svc(k6, "wrr"), svc(kU, "wrr"), svc(kT, "wrr")),
			want: []string{
				"create-service tcp/192.0.2.1:53 sched=wrr",
				"create-service udp/192.0.2.1:53 sched=wrr",
				"create-service udp/[2001:db8::1]:53 sched=wrr",
			},
		},
		{
			name:    "unowned service in current is kept",
			current: table(svc(kX, "rr", dest("10.0.0.9:80", 1, NAT))),
			owned:   notX,
			want:    []string{},
		},
		{
			name:    "unowned service in desired is not created",
			desired: table(svc(kX, "rr", dest("10.0.0.9:80", 1, NAT)), svc(kU, "wrr")),
			owned:   notX,
			want:    []string{"create-service udp/192.0.2.1:53 sched=wrr"},
		},
		{
			name:    "unowned service differing in both is not touched",
			current: table(svc(kX, "rr", dest("10.0.0.9:80", 1, NAT))),
			desired: table(svc(kX, "wrr", dest("10.0.0.8:80", 1, NAT))),
			owned:   notX,
			want:    []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := opStrings(Diff(tc.current, tc.desired, tc.owned))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Diff:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestDiffDoesNotModifyInputs(t *testing.T) {
	cur := table(svc(kU, "rr", dest("10.0.0.1:53", 1, DirectRoute)))
	des := table(svc(kU, "wrr", dest("10.0.0.2:53", 1, DirectRoute)))
	c0, d0 := cur.Clone(), des.Clone()
	ops := Diff(cur, des, nil)
	if !tablesEqual(cur, c0) || !tablesEqual(des, d0) {
		t.Fatal("Diff modified its inputs")
	}
	out := apply(cur, ops)
	if !tablesEqual(cur, c0) {
		t.Fatal("Apply modified its input")
	}
	if !tablesEqual(out, des) {
		t.Fatalf("Apply result %v, want %v", out, des)
	}
}

func TestOpString(t *testing.T) {
	tests := []struct {
		name string
		op   Op
		want string
	}{
		{"create-dest", Op{Kind: CreateDest, Service: Service{Key: kU}, Dest: dest("10.0.0.1:53", 100, DirectRoute)}, "create-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=100 dr"},
		{"update-dest", Op{Kind: UpdateDest, Service: Service{Key: k6}, Dest: dest("[2001:db8::2]:53", 0, NAT)}, "update-dest udp/[2001:db8::1]:53 -> [2001:db8::2]:53 w=0 nat"},
		{"delete-dest", Op{Kind: DeleteDest, Service: Service{Key: kT}, Dest: dest("10.0.0.1:53", 1, Tunnel)}, "delete-dest tcp/192.0.2.1:53 -> 10.0.0.1:53"},
		{"create-service", Op{Kind: CreateService, Service: Service{Key: kU, Scheduler: "mh"}}, "create-service udp/192.0.2.1:53 sched=mh"},
		{"update-service", Op{Kind: UpdateService, Service: Service{Key: kU, Scheduler: "wrr"}}, "update-service udp/192.0.2.1:53 sched=wrr"},
		{"delete-service", Op{Kind: DeleteService, Service: Service{Key: kU, Scheduler: "wrr"}}, "delete-service udp/192.0.2.1:53"},
		{"unknown kind", Op{Kind: OpKind(42), Service: Service{Key: kU}}, "op(42) udp/192.0.2.1:53 -> invalid AddrPort w=0 dr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.op.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// tablesEqual compares two tables exactly; nil and empty Dests are equal.
func tablesEqual(a, b Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, sa := range a {
		sb, ok := b[k]
		if !ok || !servicesEqual(sa, sb) {
			return false
		}
	}
	return true
}

func servicesEqual(a, b Service) bool {
	if a.Key != b.Key || a.Scheduler != b.Scheduler || len(a.Dests) != len(b.Dests) {
		return false
	}
	for addr, da := range a.Dests {
		if db, ok := b.Dests[addr]; !ok || da != db {
			return false
		}
	}
	return true
}

// randomTable draws services from a small pool of keys and destinations so
// that current and desired overlap often.
func randomTable(r *rand.Rand, keys []ServiceKey) Table {
	scheds := []string{"wrr", "rr", "mh"}
	t := make(Table)
	for _, k := range keys {
		if r.IntN(3) == 0 {
			continue
		}
		s := svc(k, scheds[r.IntN(len(scheds))])
		for range r.IntN(6) {
			var a netip.Addr
			if k.Addr.Is4() {
				a = netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + r.IntN(8))})
			} else {
				a = netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%d", 1+r.IntN(8)))
			}
			d := Destination{
				Addr:       netip.AddrPortFrom(a, 53),
				Weight:     uint32(r.IntN(3)),
				Forwarding: Forwarding(r.IntN(3)),
			}
			s.Dests[d.Addr] = d
		}
		t[k] = s
	}
	return t
}

func TestDiffApplyProperty(t *testing.T) {
	var keys []ServiceKey
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1", "2001:db8::2"} {
		for _, port := range []uint16{53, 5353} {
			for _, p := range []Protocol{UDP, TCP} {
				keys = append(keys, ServiceKey{Addr: netip.MustParseAddr(a), Port: port, Proto: p})
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		cur, des := randomTable(r, keys), randomTable(r, keys)
		ownedSet := make(map[ServiceKey]bool)
		for _, k := range keys {
			ownedSet[k] = r.IntN(4) != 0
		}
		owned := func(k ServiceKey) bool { return ownedSet[k] }
		c0, d0 := cur.Clone(), des.Clone()

		ops := Diff(cur, des, owned)
		got := apply(cur, ops)

		if !tablesEqual(cur, c0) || !tablesEqual(des, d0) {
			t.Fatalf("iteration %d: inputs modified", i)
		}
		for _, op := range ops {
			if !owned(op.Service.Key) {
				t.Fatalf("iteration %d: op on unowned service: %s", i, op)
			}
		}
		for _, k := range keys {
			want, wantOK := des[k]
			if !owned(k) {
				want, wantOK = cur[k]
			}
			have, haveOK := got[k]
			if wantOK != haveOK || (wantOK && !servicesEqual(have, want)) {
				t.Fatalf("iteration %d: service %s: got %v (%v), want %v (%v)\nops: %q", i, k, have, haveOK, want, wantOK, opStrings(ops))
			}
		}
		if again := Diff(got, des, owned); len(again) != 0 {
			t.Fatalf("iteration %d: second Diff not empty: %q", i, opStrings(again))
		}
		if !slices.IsSortedFunc(ops, compareOps) {
			t.Fatalf("iteration %d: ops out of order: %q", i, opStrings(ops))
		}
		if again := Diff(cur, des, owned); !slices.Equal(opStrings(again), opStrings(ops)) {
			t.Fatalf("iteration %d: Diff is not deterministic", i)
		}
		checkOrder(t, i, ops)
	}
}

// checkOrder asserts the documented order: per service, the service op
// before its dest ops; all service deletes last.
func checkOrder(t *testing.T, iter int, ops []Op) {
	t.Helper()
	seenDelete := false
	for _, op := range ops {
		if op.Kind == DeleteService {
			seenDelete = true
			continue
		}
		if seenDelete {
			t.Fatalf("iteration %d: %s after a delete-service", iter, op)
		}
	}
	// A service is created before any of its destinations.
	created := make(map[ServiceKey]bool)
	for _, op := range ops {
		if op.Kind == CreateService {
			created[op.Service.Key] = true
		}
	}
	seen := make(map[ServiceKey]bool)
	for _, op := range ops {
		if op.Kind == CreateService {
			seen[op.Service.Key] = true
		}
		if op.Kind == CreateDest && created[op.Service.Key] && !seen[op.Service.Key] {
			t.Fatalf("iteration %d: %s before its create-service", iter, op)
		}
	}
}

func bigTables() (cur, des Table) {
	cur, des = make(Table), make(Table)
	for i := range 2000 {
		k := ServiceKey{
			Addr:  netip.AddrFrom4([4]byte{192, 0, byte(2 + i/250), byte(1 + i%250)}),
			Port:  53,
			Proto: Protocol([]Protocol{UDP, TCP}[i%2]),
		}
		s := Service{Key: k, Scheduler: "wrr", Dests: make(map[netip.AddrPort]Destination, 20)}
		for j := range 20 {
			a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 100), byte(j + 1)}), 53)
			s.Dests[a] = Destination{Addr: a, Weight: 100, Forwarding: DirectRoute}
		}
		cur[k] = s
		des[k] = s.Clone()
	}
	return cur, des
}

func BenchmarkDiff2000x20OneChange(b *testing.B) {
	cur, des := bigTables()
	for _, k := range des.Keys()[:1] {
		for a, d := range des[k].Dests {
			d.Weight = 0
			des[k].Dests[a] = d
			break
		}
	}
	owned := func(ServiceKey) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		if ops := Diff(cur, des, owned); len(ops) != 1 {
			b.Fatalf("got %d ops, want 1", len(ops))
		}
	}
}

// apply returns the table that results from applying ops to t, in order. It
// is pure: t is not modified, and the result shares no map with t that an op
// changed (untouched services are shared, so treat the result as read-only
// or Clone it). Creating what exists updates it; deleting what is absent and
// destination ops on a missing service are ignored.
func apply(t Table, ops []Op) Table {
	out := make(Table, len(t))
	for k, s := range t {
		out[k] = s
	}
	copied := make(map[ServiceKey]bool)
	for _, op := range ops {
		key := op.Service.Key
		if s, ok := out[key]; ok && !copied[key] {
			out[key] = s.Clone()
		}
		copied[key] = true
		applyOp(out, op)
	}
	return out
}
