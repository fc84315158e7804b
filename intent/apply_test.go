package intent

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"lbdns/configs"
)

// testConfig is built by hand (the accessors scan a Config without an
// index): VIP v4 serves pool main, VIP v6 pool edge; spare is in no pool.
func testConfig() *configs.Config {
	return &configs.Config{
		VIPs: []configs.VIP{{Name: "v4", Pool: "main"}, {Name: "v6", Pool: "edge"}},
		Pools: []configs.Pool{
			{Name: "main", Members: []string{"bind-1", "unbound-1", "knot-1"}},
			{Name: "edge", Members: []string{"knot-1"}},
		},
		Resolvers: []configs.Resolver{{Name: "bind-1"}, {Name: "unbound-1"}, {Name: "knot-1"}, {Name: "spare"}},
	}
}

// fakeView answers Impact with fixed lists and records its calls.
type fakeView struct {
	cfg          *configs.Config
	lost, added  []string
	calls        int
	before, next State
}

func (v *fakeView) Config() *configs.Config { return v.cfg }

func (v *fakeView) Impact(before, after State) (lost, added []string) {
	v.calls++
	v.before, v.next = before, after
	return v.lost, v.added
}

func TestApply(t *testing.T) {
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.FixedZone("CET", 3600))
	drain := Override{Resolver: "bind-1", Action: ActionDrain, Reason: "disk", Set: at.Add(-time.Hour).UTC(), By: "uid 0"}
	poolDisable := Override{Resolver: "bind-1", Pool: "main", Action: ActionDisable, Set: at.Add(-time.Hour).UTC()}
	orphan := Override{Resolver: "gone", Action: ActionDisable, Set: at.Add(-time.Hour).UTC()}
	cur := State{Overrides: []Override{drain, poolDisable, orphan}}

	for _, tc := range []struct {
		name string
		// empty starts from no overrides instead of cur.
		empty       bool
		req         Request
		lost, added []string
		// wantKind is the refusal's kind (0: accepted), want the message.
		wantKind Kind
		want     string
		changed  bool
		next     []Override
		// impact is whether the plan was asked for.
		impact bool
	}{
		{name: "bad action", req: Request{Action: "explode", Resolver: "bind-1"},
			wantKind: BadRequest, want: `action: want drain, disable or enable, not "explode"`},
		{name: "no resolver", req: Request{Action: ActionDrain},
			wantKind: BadRequest, want: "resolver: missing"},
		{name: "pool and vip", req: Request{Action: ActionDrain, Resolver: "bind-1", Pool: "main", VIP: "v4"},
			wantKind: BadRequest, want: "pool and vip: give at most one"},
		{name: "unknown resolver", req: Request{Action: ActionDrain, Resolver: "bind-2"},
			wantKind: NotFound, want: `unknown resolver "bind-2" (did you mean "bind-1"?)`},
		{name: "unknown pool", req: Request{Action: ActionDrain, Resolver: "bind-1", Pool: "nope"},
			wantKind: NotFound, want: `unknown pool "nope"`},
		{name: "not in pool", req: Request{Action: ActionDrain, Resolver: "bind-1", Pool: "edge"},
			wantKind: NotFound, want: "resolver bind-1 is not a member of pool edge (it is in: main)"},
		{name: "in no pool", req: Request{Action: ActionDrain, Resolver: "spare", Pool: "edge"},
			wantKind: NotFound, want: "resolver spare is not a member of pool edge (it is in: no pool)"},
		{name: "unknown VIP", req: Request{Action: ActionDrain, Resolver: "bind-1", VIP: "v9"},
			wantKind: NotFound, want: `unknown VIP "v9"`},
		{name: "not in VIP's pool", req: Request{Action: ActionDrain, Resolver: "bind-1", VIP: "v6"},
			wantKind: NotFound, want: "resolver bind-1 is not in pool edge of VIP v6 (it is in: main)"},
		{name: "enable of an unknown name without overrides", req: Request{Action: ActionEnable, Resolver: "nobody"},
			wantKind: NotFound, want: `unknown resolver "nobody"`},

		{name: "drain", req: Request{Action: ActionDrain, Resolver: "unbound-1", Reason: "r", By: "uid 0", At: at},
			want: "unbound-1 drained in all pools", changed: true, impact: true,
			next: []Override{drain, poolDisable, orphan, {Resolver: "unbound-1", Action: ActionDrain, Reason: "r", Set: at.UTC(), By: "uid 0"}}},
		{name: "VIP drain", req: Request{Action: ActionDrain, Resolver: "knot-1", VIP: "v6", At: at},
			want: "knot-1 drained in vip v6", changed: true, impact: true,
			next: []Override{drain, poolDisable, orphan, {Resolver: "knot-1", VIP: "v6", Action: ActionDrain, Set: at.UTC()}}},
		{name: "same drain", req: Request{Action: ActionDrain, Resolver: "bind-1", Reason: "disk", At: at},
			want: "bind-1 is already drained in all pools; nothing changed"},
		{name: "new reason", req: Request{Action: ActionDrain, Resolver: "bind-1", Reason: "disk full", At: at},
			want: "bind-1 still drained in all pools; reason updated", changed: true, impact: true,
			next: []Override{{Resolver: "bind-1", Action: ActionDrain, Reason: "disk full", Set: at.UTC()}, poolDisable, orphan}},
		{name: "drain to disable", req: Request{Action: ActionDisable, Resolver: "bind-1", At: at},
			want: "bind-1 disabled in all pools (was drained)", changed: true, impact: true,
			next: []Override{{Resolver: "bind-1", Action: ActionDisable, Set: at.UTC()}, poolDisable, orphan}},

		{name: "last taker", req: Request{Action: ActionDrain, Resolver: "unbound-1"}, lost: []string{"v4 UDP/192.0.2.53:53", "v4 TCP/192.0.2.53:53"},
			wantKind: Conflict, impact: true,
			want: "refused: drain unbound-1 would leave v4 UDP/192.0.2.53:53, v4 TCP/192.0.2.53:53 with no destination taking new queries; enable or repair another resolver first"},
		{name: "fail open onto new takers", req: Request{Action: ActionDisable, Resolver: "knot-1"}, added: []string{"bind-1 (127.0.0.1:5301)"},
			wantKind: Conflict, impact: true,
			want: "refused: disable knot-1 would put its pool below min_healthy, and the pool would fail open and send new queries to bind-1 (127.0.0.1:5301), which the health checks keep out; repair or enable another resolver first"},

		{name: "scoped enable", req: Request{Action: ActionEnable, Resolver: "bind-1", Pool: "main"},
			want:    "bind-1: removed disable in pool main; still drained in all pools (lbctl enable bind-1 without --pool/--vip clears every override)",
			changed: true, next: []Override{drain, orphan}},
		{name: "enable", req: Request{Action: ActionEnable, Resolver: "bind-1"}, lost: []string{"enable never asks"},
			want:    "bind-1 enabled: removed drain in all pools, disable in pool main; back under health-driven control",
			changed: true, next: []Override{orphan}},
		{name: "enable of an orphan", req: Request{Action: ActionEnable, Resolver: "gone"},
			want:    "gone enabled: removed disable in all pools; back under health-driven control",
			changed: true, next: []Override{drain, poolDisable}},
		{name: "enable without override", req: Request{Action: ActionEnable, Resolver: "unbound-1"},
			want: "unbound-1 has no override in all pools; nothing changed"},
		{name: "scoped enable under a wider override", req: Request{Action: ActionEnable, Resolver: "bind-1", VIP: "v4"},
			wantKind: Conflict,
			want:     "bind-1 has no override in vip v4; nothing changed; it is still drained in all pools, disabled in pool main: run lbctl enable bind-1 without --pool/--vip to clear every override"},
		{name: "first override", empty: true, req: Request{Action: ActionDisable, Resolver: "knot-1", Pool: "edge", At: at},
			want: "knot-1 disabled in pool edge", changed: true, impact: true,
			next: []Override{{Resolver: "knot-1", Pool: "edge", Action: ActionDisable, Set: at.UTC()}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cur
			if tc.empty {
				c = State{}
			}
			saved := slices.Clone(c.Overrides)
			v := &fakeView{cfg: testConfig(), lost: tc.lost, added: tc.added}
			next, res, err := Apply(c, tc.req, v)
			if !reflect.DeepEqual(c.Overrides, saved) {
				t.Fatalf("Apply changed its input: %+v, was %+v", c.Overrides, saved)
			}
			if (v.calls > 0) != tc.impact {
				t.Errorf("Impact called %d times, want called: %v", v.calls, tc.impact)
			}
			if tc.wantKind != 0 {
				var ie *Error
				if !errors.As(err, &ie) || ie.Kind != tc.wantKind || ie.Msg != tc.want {
					t.Fatalf("err = %#v, want %v %q", err, tc.wantKind, tc.want)
				}
				if !reflect.DeepEqual(next, c) || res != (Result{}) {
					t.Errorf("refused, yet next = %+v, result %+v", next, res)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if res.Message != tc.want || res.Changed != tc.changed {
				t.Errorf("result = %+v, want %q changed=%v", res, tc.want, tc.changed)
			}
			want := c.Overrides
			if tc.changed {
				want = tc.next
			}
			if !reflect.DeepEqual(next.Overrides, want) {
				t.Errorf("next =\n%+v\nwant\n%+v", next.Overrides, want)
			}
			if tc.impact && (!reflect.DeepEqual(v.before, c) || !reflect.DeepEqual(v.next, next)) {
				t.Errorf("Impact(%+v, %+v), want (cur, next)", v.before, v.next)
			}
		})
	}
}

func TestOrphaned(t *testing.T) {
	cfg := testConfig()
	for _, tc := range []struct {
		o    Override
		want string
	}{
		{Override{Resolver: "bind-1"}, ""},
		{Override{Resolver: "bind-1", Pool: "main"}, ""},
		{Override{Resolver: "bind-1", VIP: "v4"}, ""},
		{Override{Resolver: "gone"}, "resolver gone is not in the configuration"},
		{Override{Resolver: "bind-1", Pool: "old"}, "pool old is not in the configuration"},
		{Override{Resolver: "bind-1", VIP: "old"}, "VIP old is not in the configuration"},
		{Override{Resolver: "bind-1", Pool: "edge"}, "resolver bind-1 is not a member of pool edge"},
		{Override{Resolver: "bind-1", VIP: "v6"}, "resolver bind-1 is not a member of pool edge"},
	} {
		if got := Orphaned(cfg, tc.o); got != tc.want {
			t.Errorf("Orphaned(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	for k, want := range map[Kind]string{BadRequest: "bad request", NotFound: "not found", Conflict: "conflict", 9: "kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d) = %q, want %q", k, got, want)
		}
	}
	if e := (&Error{Kind: Conflict, Msg: "m"}); e.Error() != "m" {
		t.Errorf("Error() = %q", e.Error())
	}
}
