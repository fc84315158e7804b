package clientfw

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/intent"
)

func TestDesiredAndSame(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	act := func(kind, client string, rate int, until time.Time) intent.ClientAction {
		return intent.ClientAction{Client: netip.MustParsePrefix(client), Action: kind, Rate: rate, Until: until, Reason: "r", Set: now}
	}
	actions := []intent.ClientAction{
		act(intent.ActionBlock, "203.0.113.9/32", 0, now.Add(10*time.Minute)),
		act(intent.ActionLimit, "2001:db8:7::/48", 50, now.Add(time.Minute+time.Microsecond)),
		act(intent.ActionLimit, "198.51.100.0/24", 50, now.Add(time.Hour)),
		act(intent.ActionLimit, "198.18.0.7/32", 5, now.Add(time.Hour)),
		act(intent.ActionBlock, "203.0.113.1/32", 0, now), // ended
	}
	r := Desired(actions, now)
	var names []string
	for _, s := range r.Sets {
		var el []string
		for _, e := range s.Elems {
			el = append(el, e.Prefix.String()+"@"+e.Timeout.String())
		}
		names = append(names, s.Name+"["+strings.Join(el, " ")+"]")
	}
	want := "block4[203.0.113.9/32@10m0s] block6[] limit4_5[198.18.0.7/32@1h0m0s] limit4_50[198.51.100.0/24@1h0m0s] limit6_50[2001:db8:7::/48@1m0.001s]"
	if strings.Join(names, " ") != want {
		t.Fatalf("Desired\n%s\nwant\n%s", strings.Join(names, " "), want)
	}
	if c := r.Sets[0].Elems[0].Comment; c != "lbdns block 203.0.113.9 until "+strconv.FormatInt(now.Add(10*time.Minute).Unix(), 10) {
		t.Errorf("comment %q", c)
	}
	actual := Actual{Present: true, Rules: r.Rules(), Meters: []string{"meter4_50", "meter4_5", "meter6_50"}}
	for _, s := range r.Sets {
		s.Elems = append([]Elem(nil), s.Elems...)
		for i := range s.Elems {
			s.Elems[i].Timeout = time.Second // runs down in the kernel: not compared
		}
		actual.Sets = append([]Set{s}, actual.Sets...)
	}
	if same, why := Same(r, actual); !same {
		t.Fatalf("Same = false (%s) for the table read back", why)
	}
	for _, tc := range []struct {
		name   string
		change func(a *Actual)
		why    string
	}{
		{"absent", func(a *Actual) { *a = Actual{Rules: -1} }, "missing"},
		{"a rule removed", func(a *Actual) { a.Rules-- }, "rules"},
		{"a meter gone", func(a *Actual) { a.Meters = a.Meters[1:] }, "meter meter4_50 is missing"},
		{"an element added by hand", func(a *Actual) {
			for i := range a.Sets {
				if a.Sets[i].Name == "block4" {
					a.Sets[i].Elems = append(a.Sets[i].Elems, Elem{Prefix: netip.MustParsePrefix("10.0.2.2/32")})
				}
			}
		}, "block4 has 2 elements"},
		{"another expiry", func(a *Actual) {
			for i := range a.Sets {
				if a.Sets[i].Name == "block4" {
					a.Sets[i].Elems = []Elem{{Prefix: netip.MustParsePrefix("203.0.113.9/32"), Comment: "lbdns block 203.0.113.9 until 1"}}
				}
			}
		}, "holds 203.0.113.9/32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := actual
			a.Sets = append([]Set(nil), actual.Sets...)
			for i := range a.Sets {
				a.Sets[i].Elems = append([]Elem(nil), a.Sets[i].Elems...)
			}
			a.Meters = append([]string(nil), actual.Meters...)
			tc.change(&a)
			if same, why := Same(r, a); same || !strings.Contains(why, tc.why) {
				t.Errorf("Same = %v (%q), want false with %q", same, why, tc.why)
			}
		})
	}
	if same, _ := Same(Desired(nil, now), Actual{Rules: -1}); !same {
		t.Error("no action and no table differ")
	}
	if same, why := Same(Desired(nil, now), Actual{Present: true}); same || !strings.Contains(why, "table is there") {
		t.Errorf("no action and a table: %v %q", same, why)
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.0/24": "10.0.0.255", "10.0.0.7/32": "10.0.0.7", "2001:db8::/48": "2001:db8:0:ffff:ffff:ffff:ffff:ffff", "255.255.255.0/24": "255.255.255.255"} {
		if got := lastAddr(netip.MustParsePrefix(in)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", in, got, want)
		}
	}
	if els := elements([]Elem{{Prefix: netip.MustParsePrefix("255.255.255.0/24")}}); len(els) != 1 {
		t.Errorf("the last /24 has %d elements, want only its start", len(els))
	}
}
