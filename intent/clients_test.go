package intent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
)

func testPolicy() ClientPolicy {
	return ClientPolicy{MaxEntries: 3, DefaultRate: 50,
		Protected: []Protected{
			{Net: netip.MustParsePrefix("192.0.2.10/32"), What: "resolver r"},
			{Net: netip.MustParsePrefix("10.9.0.0/16"), What: "actions.allow[0] (10.9.0.0/16)"},
			{Net: netip.MustParsePrefix("198.51.100.0/24"), What: "GSLB topology net 198.51.100.0/24", Whole: true},
		},
		Shared: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}}
}

func TestApplyClient(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	block := func(client string, d time.Duration) ClientRequest {
		return ClientRequest{Action: ActionBlock, Client: client, For: d, Reason: "flood", By: "uid 0", At: t0}
	}
	limit := func(client string, rate int) ClientRequest {
		return ClientRequest{Action: ActionLimit, Client: client, Rate: rate, For: 10 * time.Minute, Reason: "flood", By: "uid 0", At: t0}
	}
	unblock := func(client string) ClientRequest { return ClientRequest{Action: ActionUnblock, Client: client, At: t0} }
	one := State{Clients: []ClientAction{{Client: netip.MustParsePrefix("203.0.113.0/24"), Action: ActionLimit, Rate: 50,
		Until: t0.Add(time.Hour), Reason: "flood", Set: t0.Add(-time.Minute)}}}
	expired := State{Clients: []ClientAction{{Client: netip.MustParsePrefix("203.0.113.0/24"), Action: ActionBlock,
		Until: t0, Reason: "old", Set: t0.Add(-time.Hour)}}}
	full := State{}
	for _, c := range []string{"203.0.113.1/32", "203.0.113.2/32", "203.0.113.3/32"} {
		full.Clients = append(full.Clients, ClientAction{Client: netip.MustParsePrefix(c), Action: ActionBlock, Until: t0.Add(time.Hour), Reason: "x", Set: t0})
	}
	for _, tc := range []struct {
		name    string
		cur     State
		req     ClientRequest
		want    []string // the clients' Text after
		kind    Kind     // 0: no error
		msg     string   // in the message or the error
		changed bool
	}{
		{"block an address", State{}, block("203.0.113.7", 10*time.Minute), []string{"block 203.0.113.7 until 2026-12-01T14:10:00Z"}, 0, "dropped before IPVS", true},
		{"limit takes the default rate", State{}, limit("2001:db8:1::/48", 0), []string{"limit 2001:db8:1::/48 to 50/s until 2026-12-01T14:10:00Z"}, 0, "50 packets/s", true},
		{"IPv4-mapped is IPv4", State{}, limit("::ffff:203.0.113.9", 7), []string{"limit 203.0.113.9 to 7/s until 2026-12-01T14:10:00Z"}, 0, "", true},
		{"block replaces the limit of the same client", one, block("203.0.113.0/24", time.Minute), []string{"block 203.0.113.0/24 until 2026-12-01T14:01:00Z"}, 0, "(was limit 203.0.113.0/24 to 50/s", true},
		{"unblock", one, unblock("203.0.113.0/24"), nil, 0, "removed limit of 203.0.113.0/24", true},
		{"unblock of nothing", State{}, unblock("203.0.113.5"), nil, 0, "nothing changed", false},
		{"unblock inside a prefix", one, unblock("203.0.113.5"), []string{"limit 203.0.113.0/24 to 50/s until 2026-12-01T15:00:00Z"}, Conflict, "unblock 203.0.113.0/24 instead", false},
		{"expired actions go", expired, limit("198.18.0.1", 10), []string{"limit 198.18.0.1 to 10/s until 2026-12-01T14:10:00Z"}, 0, "", true},
		{"an expired action does not overlap", expired, block("203.0.113.5", time.Minute), []string{"block 203.0.113.5 until 2026-12-01T14:01:00Z"}, 0, "", true},
		{"overlap refused", one, block("203.0.113.5", time.Minute), nil, Conflict, "overlaps 203.0.113.0/24", false},
		{"max entries", full, block("198.18.0.1", time.Minute), nil, Conflict, "actions.max_entries", false},
		{"a back end is protected", State{}, block("192.0.2.0/24", time.Minute), nil, Conflict, "touches resolver r", false},
		{"inside the allowlist", State{}, limit("10.9.3.4", 5), nil, Conflict, "touches actions.allow[0]", false},
		{"a whole topology net is refused", State{}, block("198.51.0.0/16", time.Minute), nil, Conflict, "covers the whole of GSLB topology net", false},
		{"a client inside a topology net is not", State{}, block("198.51.100.7", time.Minute), []string{"block 198.51.100.7 until 2026-12-01T14:01:00Z"}, 0, "", true},
		{"shared needs force", State{}, block("100.64.1.1", time.Minute), nil, Conflict, "limit it instead, or block --force", false},
		{"shared may be limited", State{}, limit("100.64.1.1", 0), []string{"limit 100.64.1.1 to 50/s until 2026-12-01T14:10:00Z"}, 0, "", true},
		{"shared forced", State{}, func() ClientRequest { r := block("100.64.1.1", time.Minute); r.Force = true; return r }(), []string{"block 100.64.1.1 until 2026-12-01T14:01:00Z"}, 0, "", true},
		{"too wide", State{}, block("203.0.0.0/8", time.Minute), nil, BadRequest, "shorter than /16", false},
		{"host bits", State{}, block("203.0.113.7/24", time.Minute), nil, BadRequest, "the network is 203.0.113.0/24", false},
		{"garbage", State{}, block("nope", time.Minute), nil, BadRequest, "not an address or a prefix", false},
		{"no duration", State{}, block("203.0.113.7", 0), nil, BadRequest, "for: required", false},
		{"too long", State{}, block("203.0.113.7", 8*24*time.Hour), nil, BadRequest, "want 1s to", false},
		{"no reason", State{}, func() ClientRequest { r := block("203.0.113.7", time.Minute); r.Reason = " "; return r }(), nil, BadRequest, "reason: required", false},
		{"rate with block", State{}, func() ClientRequest { r := block("203.0.113.7", time.Minute); r.Rate = 5; return r }(), nil, BadRequest, "rate: only with limit", false},
		{"bad rate", State{}, limit("203.0.113.7", -1), nil, BadRequest, "rate: want 1 to", false},
		{"bad action", State{}, ClientRequest{Action: "ban", Client: "203.0.113.7"}, nil, BadRequest, "want block, limit or unblock", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, res, err := ApplyClient(tc.cur, tc.req, testPolicy())
			var ie *Error
			switch {
			case tc.kind == 0 && err != nil:
				t.Fatalf("error %v", err)
			case tc.kind != 0 && (!errors.As(err, &ie) || ie.Kind != tc.kind):
				t.Fatalf("error %v, want kind %v", err, tc.kind)
			}
			text := res.Message
			if err != nil {
				text = err.Error()
			}
			if !strings.Contains(text, tc.msg) {
				t.Errorf("message %q, want it to hold %q", text, tc.msg)
			}
			if res.Changed != tc.changed {
				t.Errorf("changed = %v, want %v", res.Changed, tc.changed)
			}
			if err != nil || !res.Changed {
				tc.want = nil
				for _, c := range tc.cur.Clients {
					tc.want = append(tc.want, c.Text())
				}
			}
			var got []string
			for _, c := range next.Clients {
				got = append(got, c.Text())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("clients = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExpire(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	a := ClientAction{Client: netip.MustParsePrefix("203.0.113.1/32"), Action: ActionBlock, Until: t0, Reason: "a", Set: t0.Add(-time.Minute)}
	b := ClientAction{Client: netip.MustParsePrefix("203.0.113.2/32"), Action: ActionLimit, Rate: 5, Until: t0.Add(time.Minute), Reason: "b", Set: t0.Add(-time.Minute)}
	st := State{Clients: []ClientAction{b, a}}
	if at, ok := st.NextExpiry(); !ok || !at.Equal(t0) {
		t.Errorf("NextExpiry = %v %v, want %v", at, ok, t0)
	}
	if next, gone := st.Expire(t0.Add(-time.Nanosecond)); len(gone) != 0 || len(next.Clients) != 2 {
		t.Errorf("before the expiry: gone %v, left %v", gone, next.Clients)
	}
	next, gone := st.Expire(t0)
	if len(gone) != 1 || gone[0] != a || len(next.Clients) != 1 || next.Clients[0] != b || len(st.Clients) != 2 {
		t.Errorf("at the expiry: gone %v, left %v (st now %v)", gone, next.Clients, st.Clients)
	}
	if _, ok := (State{}).NextExpiry(); ok {
		t.Error("NextExpiry of no action is set")
	}
}

// TestClientsPersist: client actions go through the file store and come
// back from a new store over the same directory (a restart), expiry
// included; a file whose actions the daemon would have to guess about is
// refused.
func TestClientsPersist(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	st, _, err := ApplyClient(State{}, ClientRequest{Action: ActionLimit, Client: "2001:db8:5::/48", Rate: 20, For: time.Hour, Reason: "launch storm", By: "uid 0", At: t0}, testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := NewFileStore(dir, FileOptions{}).Save(ctx, st, 0); err != nil {
		t.Fatal(err)
	}
	got, err := NewFileStore(dir, FileOptions{}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.State.Clients) != 1 || got.State.Clients[0] != st.Clients[0] || got.Revision != 1 {
		t.Fatalf("loaded %+v at %d, want %+v at 1", got.State.Clients, got.Revision, st.Clients)
	}
	if !strings.Contains(got.State.Summary(), "1 client action") {
		t.Errorf("summary %q", got.State.Summary())
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"version":1,"overrides":[],"clients":[{"client":"203.0.113.7/24","action":"block","until":"2026-12-01T14:00:00Z","reason":"x","set":"2026-12-01T13:00:00Z"}]}`, "not canonical"},
		{`{"version":1,"overrides":[],"clients":[{"client":"203.0.113.7/32","action":"ban","until":"2026-12-01T14:00:00Z","reason":"x","set":"2026-12-01T13:00:00Z"}]}`, "not block or limit"},
		{`{"version":1,"overrides":[],"clients":[{"client":"203.0.113.7/32","action":"limit","until":"2026-12-01T14:00:00Z","reason":"x","set":"2026-12-01T13:00:00Z"}]}`, "rate 0"},
		{`{"version":1,"overrides":[],"clients":[{"client":"203.0.113.7/32","action":"block","reason":"x","set":"2026-12-01T13:00:00Z"}]}`, "until missing"},
		{`{"version":1,"overrides":[],"clients":[{"client":"203.0.113.0/24","action":"block","until":"2026-12-01T14:00:00Z","reason":"x","set":"2026-12-01T13:00:00Z"},{"client":"203.0.113.7/32","action":"block","until":"2026-12-01T14:00:00Z","reason":"x","set":"2026-12-01T13:00:00Z"}]}`, "overlaps"},
	} {
		if _, err := Parse([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", bad.doc, err, bad.want)
		}
	}
}

func TestClientPolicyOf(t *testing.T) {
	cfg := &configs.Config{
		Resolvers: []configs.Resolver{{Name: "r1", AddrPort: netip.MustParseAddrPort("192.0.2.10:53")}},
		VIPs:      []configs.VIP{{Name: "v4", Addr: netip.MustParseAddr("192.0.2.53")}},
		Fleet:     &configs.Fleet{Endpoints: []string{"https://198.18.7.1:2379", "etcd.example:2379"}},
		Actions:   configs.Actions{MaxEntries: 9, DefaultLimitQPS: 7, AllowNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	}
	pol := ClientPolicyOf(cfg)
	if pol.MaxEntries != 9 || pol.DefaultRate != 7 {
		t.Errorf("policy %+v", pol)
	}
	var what []string
	for _, p := range pol.Protected {
		what = append(what, p.Net.String()+" "+p.What)
	}
	want := "192.0.2.10/32 resolver r1|192.0.2.53/32 VIP v4|198.18.7.1/32 etcd endpoint https://198.18.7.1:2379|10.0.0.0/8 actions.allow[0] (10.0.0.0/8)"
	if strings.Join(what, "|") != want {
		t.Errorf("protected\n%s\nwant\n%s", strings.Join(what, "|"), want)
	}
}
