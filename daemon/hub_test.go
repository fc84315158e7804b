package daemon

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// twoMembers is a GSLB pool www of two members probed at 127.0.0.9 and
// 127.0.0.10 (answered 192.0.2.80 and .81), checked every %s (rise 1,
// fall 2, timeout 50 ms), served on 127.0.0.1 port %d, answering every member up: with the second
// down, a policy answer is [192.0.2.80] and a fail-open answer both.
const twoMembers = `
[check.web]
interval = "%s"
timeout = "50ms"
rise = 1
fall = 2

[check.web.dns]
qname = "www.example."

[[gslb.pool]]
name = "www"
monitors = ["web"]
algorithm = "all"

[[gslb.pool.member]]
name = "www-1"
address = "192.0.2.80"
probe_address = "127.0.0.9"

[[gslb.pool.member]]
name = "www-2"
address = "192.0.2.81"
probe_address = "127.0.0.10"

[[gslb.zone]]
name = "gslb.example"
ns = ["ns1.gslb.example."]

[gslb.server]
listen = ["127.0.0.1:%d"]
`

// manyNames returns n names n0 ... of zone gslb.example. over pool www.
func manyNames(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"n%d.gslb.example\"\n\n[[gslb.name.policy]]\npool = \"www\"\n", i)
	}
	return b.String()
}

// askA returns the A addresses the responder at addr answers for name.
func askA(t testing.TB, addr, name string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return []string{err.Error()}
	}
	out := []string{}
	if r.Rcode != dns.RcodeSuccess {
		out = append(out, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

// memberSince returns when member's monitor entered its state.
func memberSince(d *Daemon, member string) time.Time {
	for k, st := range d.Monitor().Status() {
		if k.Kind == gslb.MonitorKind && k.Member == member {
			return st.Health.Since
		}
	}
	return time.Time{}
}

// statusOf returns the status of member's monitor.
func statusOf(d *Daemon, member string) (monitor.TargetStatus, bool) {
	for k, st := range d.Monitor().Status() {
		if k.Kind == gslb.MonitorKind && k.Member == member {
			return st, true
		}
	}
	return monitor.TargetStatus{}, false
}

// TestManyNamesAnswerMembersAfterFirstBuild: with 20,000 names whose
// members come up while the first snapshot is built (its 40,000 warm-up
// last resorts journalled), the names answer by their policy (the member
// up), not by their last resort, within rise × interval + 1 s of the
// member's coming up.
func TestManyNamesAnswerMembersAfterFirstBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 names")
	}
	dir := t.TempDir()
	port := freePort(t)
	path := writeConfig(t, dir, fmt.Sprintf(twoMembers, "100ms", port)+manyNames(20000))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{netip.MustParseAddrPort("127.0.0.10:53"): true}}
	h := start(t, path, vip.NewMemClient(), fp)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const last = "n19999.gslb.example."
	var answered time.Time
	poll.Until(t, 30*time.Second, "the last name answering by its policy", func() (bool, string) {
		got := askA(t, addr, last)
		answered = time.Now()
		return slices.Equal(got, []string{"192.0.2.80"}), fmt.Sprint(got)
	})
	up := memberSince(h.d, "www-1")
	if up.IsZero() {
		t.Fatal("www-1 has no state")
	}
	took, bound := answered.Sub(up), raceScale*(1*100*time.Millisecond+time.Second) // rise × interval + 1 s
	if took > bound {
		t.Errorf("answered by policy %v after www-1 came up, want at most %v", took, bound)
	}
	t.Logf("20,000 names answered by their policy %v after www-1 came up (bound %v)", took.Round(time.Millisecond), bound)
	for _, n := range []string{"n0.gslb.example.", "n10000.gslb.example."} {
		if got := askA(t, addr, n); !slices.Equal(got, []string{"192.0.2.80"}) {
			t.Errorf("%s: %v, want [192.0.2.80]", n, got)
		}
	}
}

// TestJournalBurstDoesNotDelayMemberDown: 10,000 journal events written
// while a GSLB member dies do not delay its removal from the answers
// beyond fall × interval + timeout + 100 ms of its first failure.
func TestJournalBurstDoesNotDelayMemberDown(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	path := writeConfig(t, dir, fmt.Sprintf(twoMembers, "100ms", port)+manyNames(8000))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := start(t, path, vip.NewMemClient(), fp)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const name = "n0.gslb.example."
	poll.Until(t, 10*time.Second, "both members up", func() (bool, string) {
		var up []string
		for k, st := range h.d.Monitor().Status() {
			if k.Kind == gslb.MonitorKind && st.Health.State == health.Up {
				up = append(up, k.Member)
			}
		}
		return len(up) == 2, fmt.Sprint(up)
	})
	poll.Until(t, 10*time.Second, "both members answered", func() (bool, string) {
		got := askA(t, addr, name)
		return slices.Equal(got, []string{"192.0.2.80", "192.0.2.81"}), fmt.Sprint(got)
	})

	// The journal is busy the way a large outage makes it: just before
	// www-2's second failing probe (fall = 2), a GSLB entry; then, from
	// the moment the monitor sees www-2 down (before the daemon
	// journals it), 10,000 entries: www-2's "down" lands inside them,
	// with thousands after it, while a responder that reads the journal
	// is rebuilding for the first entry.
	burst := make(chan struct{})
	go func() {
		defer close(burst)
		deadline := time.Now().Add(10 * time.Second)
		var first time.Time
		for time.Now().Before(deadline) && first.IsZero() {
			if st, ok := statusOf(h.d, "www-2"); ok && st.Health.ConsecutiveFail == 1 {
				first = st.LastAt
			}
			runtime.Gosched()
		}
		for time.Now().Before(first) {
			runtime.Gosched()
		}
		h.d.Events().Append(control.Event{Kind: control.EventState, Subject: gslb.MonitorKey("www", "www-1", "web").String(), Message: "busy"})
		for time.Now().Before(deadline) {
			if st, _ := statusOf(h.d, "www-2"); st.Health.State == health.Down {
				break
			}
			runtime.Gosched()
		}
		for i := range 10000 {
			h.d.Events().Append(control.Event{Kind: control.EventState, Subject: fmt.Sprintf("resolver:r%d/recursive", i), Message: "burst"})
		}
	}()
	failed := time.Now()
	fp.set("127.0.0.10:53", true)
	var removed time.Time
	poll.Until(t, 10*time.Second, "www-2 out of the answers", func() (bool, string) {
		got := askA(t, addr, name)
		removed = time.Now()
		return slices.Equal(got, []string{"192.0.2.80"}), fmt.Sprint(got)
	})
	<-burst
	// fall probes an interval apart, the first within an interval of
	// the failure; the last one's timeout; then the rebuild.
	took, bound := removed.Sub(failed), raceScale*(2*100*time.Millisecond+50*time.Millisecond+100*time.Millisecond)
	if took > bound {
		t.Errorf("www-2 left the answers %v after it failed, want at most %v", took, bound)
	}
	t.Logf("www-2 left the answers %v after it failed, through a burst of 10,000 journal entries (bound %v)", took.Round(time.Millisecond), bound)
	if down := memberSince(h.d, "www-2"); down.Before(failed) {
		t.Errorf("www-2 down since %v, before it failed at %v", down, failed)
	}
}
