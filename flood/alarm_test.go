package flood

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestRateAlarm(t *testing.T) {
	a := NewAlarms(AlarmConfig{Floor: 100, Rise: 4, Baseline: time.Minute, ClearAfter: 3 * time.Second})
	now := t0
	step := func(rate float64) (Alarm, bool) {
		now = now.Add(time.Second)
		return a.Rate("responder", rate, now)
	}
	// A steady 50 q/s: the baseline.
	for range 120 {
		if al, ok := step(50); ok {
			t.Fatalf("steady rate: %+v", al)
		}
	}
	// 150 q/s: over the floor but not 4 times the baseline.
	if al, ok := step(150); ok {
		t.Fatalf("a rise of 3x: %+v", al)
	}
	// 50 -> 60 q/s baseline; a quiet source at 5 q/s rising 10x stays
	// under the floor.
	q := NewAlarms(AlarmConfig{Floor: 100, Rise: 4})
	q.Rate("vip quiet", 5, now)
	if al, ok := q.Rate("vip quiet", 60, now.Add(time.Second)); ok {
		t.Fatalf("under the floor: %+v", al)
	}
	// A flood: raised once, with the baseline it rose over.
	al, ok := step(1000)
	if !ok || !al.Raised || al.Reason != ReasonRise || al.Source != "responder" || al.Rate != 1000 || al.Baseline < 49 || al.Baseline > 60 {
		t.Fatalf("flood: %+v %v", al, ok)
	}
	for range 100 {
		if al, ok := step(1000); ok {
			t.Fatalf("raised again: %+v", al)
		}
	}
	if act := a.Active(); len(act) != 1 || act[0].ID != "responder" {
		t.Fatalf("active: %+v", act)
	}
	// Hysteresis: falling under the raise level (~220) but above half
	// of it clears nothing; under half of it, after ClearAfter.
	for range 10 {
		if al, ok := step(150); ok {
			t.Fatalf("cleared above the clear level: %+v", al)
		}
	}
	step(50)
	step(50)
	step(300) // back up: the count starts again
	step(50)
	step(50)
	if al, ok := step(50); ok {
		t.Fatalf("cleared before ClearAfter: %+v", al)
	}
	al, ok = step(50)
	if !ok || al.Raised || al.Rate != 50 || !al.Since.Before(al.At) {
		t.Fatalf("clear: %+v %v", al, ok)
	}
	if len(a.Active()) != 0 {
		t.Errorf("active after clear: %+v", a.Active())
	}
	// The baseline stood during the alarm: the same flood raises again.
	if al, ok := step(1000); !ok || !al.Raised || al.Baseline > 60 {
		t.Fatalf("second flood: %+v %v", al, ok)
	}
	a.Forget(func(string) bool { return false })
	if len(a.Active()) != 0 {
		t.Error("Forget kept an alarm")
	}
}

func TestShareAlarm(t *testing.T) {
	a := NewAlarms(AlarmConfig{Floor: 100, Share: 0.5, ShareKinds: []Kind{KindClient}, ClearAfter: 2 * time.Second})
	view := func(queries uint64, share float64) View {
		return View{Kind: KindClient, Start: t0, End: t0.Add(10 * time.Second), Queries: queries,
			Entries: []ViewEntry{{Key: "192.0.2.9", Count: uint64(share * float64(queries)), Share: share}}}
	}
	if got := a.Shares(view(100000, 0.45), t0); len(got) != 0 {
		t.Fatalf("under the share: %+v", got)
	}
	if got := a.Shares(view(500, 0.9), t0); len(got) != 0 {
		t.Fatalf("under the floor (50 q/s): %+v", got)
	}
	if got := a.Shares(View{Kind: KindName, Start: t0, End: t0.Add(time.Second), Queries: 1e6, Entries: []ViewEntry{{Key: "x.", Share: 1}}}, t0); len(got) != 0 {
		t.Fatalf("a kind not watched: %+v", got)
	}
	got := a.Shares(view(100000, 0.7), t0)
	if len(got) != 1 || !got[0].Raised || got[0].ID != "share responder clients 192.0.2.9" || got[0].Source != "responder" || got[0].Key != "192.0.2.9" || got[0].Share != 0.7 || got[0].Rate != 10000 {
		t.Fatalf("raised: %+v", got)
	}
	if got := a.Shares(view(100000, 0.45), t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("again, or cleared above 0.8 of the share: %+v", got)
	}
	a.Shares(view(100000, 0.1), t0.Add(2*time.Second))
	got = a.Shares(view(100000, 0.1), t0.Add(4*time.Second))
	if len(got) != 1 || got[0].Raised || got[0].Share != 0.1 {
		t.Fatalf("cleared: %+v", got)
	}
}

// TestPipelineFlood plants one client flooding one name among Zipf
// background traffic from many clients: the alarm raised in the first
// second of the flood names that client, its prefix and that name on
// top, with bounds that hold its true rate.
func TestPipelineFlood(t *testing.T) {
	p := NewPipeline(Config{
		Tracker: TrackerConfig{Counters: 64, Zones: []string{"gslb.example.com"}},
		Alarms:  AlarmConfig{Floor: 500, Rise: 4, Share: 0.5, ShareKinds: []Kind{KindClient}, ClearAfter: 3 * time.Second},
	}, t0)
	pr := p.Producer(SourceResponder)
	defer pr.Close()
	r := rand.New(rand.NewPCG(3, 4))
	zc := rand.NewZipf(r, 1.2, 1, 9999)
	zn := rand.NewZipf(r, 1.2, 1, 999)
	flooder := netip.MustParseAddr("203.0.113.66")
	msgs := map[string][]byte{}
	msg := func(name string) []byte {
		m, ok := msgs[name]
		if !ok {
			m, _ = new(dns.Msg).SetQuestion(name, dns.TypeA).Pack()
			msgs[name] = m
		}
		return m
	}
	background := func() {
		for range 2000 {
			c := uint32(zc.Uint64())
			client := netip.AddrFrom4([4]byte{10, byte(c >> 16), byte(c >> 8), byte(c)})
			pr.AddMessage(client, msg(fmt.Sprintf("n%d.gslb.example.com.", zn.Uint64())), nil)
		}
	}
	now := t0
	for s := range 30 {
		background()
		now = now.Add(Epoch)
		if got := p.Step(now, map[string]float64{"vip dns": 3000}); len(got) != 0 {
			t.Fatalf("second %d, background only: %+v", s, got)
		}
	}
	// The flood: 8000 q/s from one client, for one name.
	floodName := "Boom.App.gslb.example.com."
	flood := func() []Alarm {
		for range 8000 {
			pr.AddMessage(flooder, msg(floodName), msg(floodName))
		}
		background()
		now = now.Add(Epoch)
		return p.Step(now, map[string]float64{"vip dns": 3000})
	}
	// The first second of the flood raises the responder's rise and the
	// client's share (of the last second: 8000 of 10000).
	got := flood()
	if len(got) != 2 || got[0].ID != "responder" || got[1].ID != "share responder clients 203.0.113.66" || got[1].Share < 0.5 || len(got[1].Top) != 3 {
		t.Fatalf("flood: want the responder's rise and the client's share, got %+v", got)
	}
	al := got[0]
	if !al.Raised || al.Rate != 10000 || al.Baseline != 2000 || len(al.Top) != 3 {
		t.Fatalf("rise alarm: %+v", al)
	}
	for i, want := range []string{"203.0.113.66", "203.0.113.0/24", "boom.app.gslb.example.com."} {
		v := al.Top[i]
		e := v.Entries[0]
		if e.Key != want {
			t.Errorf("%s: top %q, want %q (%+v)", v.Kind, e.Key, want, v.Entries)
		}
		// 8000 in the last 2 s: the bounds hold it.
		if i != 1 && (e.Count-e.Error > 8000 || e.Count < 8000) {
			t.Errorf("%s: %d-%d does not hold 8000", v.Kind, e.Count, e.Error)
		}
		if e.Rate != float64(e.Count)/2 {
			t.Errorf("%s: rate %v of %d in 2 s", v.Kind, e.Rate, e.Count)
		}
	}
	for range 2 {
		if got := flood(); len(got) != 0 {
			t.Fatalf("the flood goes on: %+v", got)
		}
	}
	if act := p.Active(); len(act) != 2 || len(act[0].Top) != 3 {
		t.Errorf("active: %+v", act)
	}
	// The flood stops: cleared after ClearAfter.
	var cleared []Alarm
	for range 15 {
		background()
		now = now.Add(Epoch)
		cleared = append(cleared, p.Step(now, map[string]float64{"vip dns": 3000})...)
	}
	if len(cleared) != 2 || cleared[0].Raised || cleared[1].Raised {
		t.Errorf("after the flood: %+v", cleared)
	}
	// Observe feeds the same pipeline, under its own source.
	for range 10 {
		p.Observe(Query{Client: flooder, Name: "dnstap.example.", Type: dns.TypeA, Source: SourceDnstap})
	}
	now = now.Add(Epoch)
	p.Step(now, nil)
	if v := p.Top(SourceDnstap, KindName, 10*time.Second, 100); !hasKey(v, "dnstap.example.") || v.Source != SourceDnstap {
		t.Errorf("observed name not counted: %+v", v)
	}
	if v := p.Top(SourceResponder, KindName, 10*time.Second, 100); hasKey(v, "dnstap.example.") {
		t.Errorf("a name dnstap reported is in the responder's view: %+v", v)
	}
	// A source is watched from its first query on, also while it sends
	// nothing (here through a Producer, as the daemon's dnstap intake
	// records): its flood raises, its silence clears.
	q := NewPipeline(Config{Alarms: AlarmConfig{Floor: 500, Rise: 4, ClearAfter: 3 * time.Second}}, now)
	dp := q.Producer(SourceDnstap)
	defer dp.Close()
	for range 10 {
		dp.Add(Query{Client: flooder, Name: "dnstap.example.", Type: dns.TypeA, Source: SourceDnstap})
	}
	now = now.Add(Epoch)
	q.Step(now, nil)
	for range 1000 {
		dp.Add(Query{Client: flooder, Name: "dnstap.example.", Type: dns.TypeA, Source: SourceDnstap})
	}
	now = now.Add(Epoch)
	if got := q.Step(now, nil); len(got) != 1 || got[0].ID != "dnstap" || !got[0].Raised {
		t.Fatalf("dnstap flood: %+v", got)
	}
	var after []Alarm
	for range 5 {
		now = now.Add(Epoch)
		after = append(after, q.Step(now, nil)...)
	}
	if len(after) != 1 || after[0].ID != "dnstap" || after[0].Raised {
		t.Errorf("dnstap silent: %+v", after)
	}
}

func hasKey(v View, key string) bool {
	_, ok := v.find(key)
	return ok
}

// TestRateAlarmFromStandstill: an alarm raised over the floor from a
// baseline of nothing (traffic starting after a restart) clears once the
// rate is steady, which becomes the normal: a later rise over it raises
// again; an alarm raised over a known normal does not learn the flood.
func TestRateAlarmFromStandstill(t *testing.T) {
	a := NewAlarms(AlarmConfig{Floor: 1000, Rise: 4, Baseline: 5 * time.Minute, ClearAfter: 10 * time.Second})
	now := t0
	step := func(rate float64) (Alarm, bool) {
		now = now.Add(time.Second)
		return a.Rate("dnstap", rate, now)
	}
	for range 30 {
		step(0)
	}
	if al, ok := step(1500); !ok || !al.Raised || al.Baseline != 0 {
		t.Fatalf("1500 q/s from nothing: %+v %v, want raised over a baseline of 0", al, ok)
	}
	cleared := -1
	for i := range 300 {
		if al, ok := step(1500 + float64(i%7)*10); ok {
			if al.Raised {
				t.Fatalf("raised again at %d s: %+v", i, al)
			}
			cleared = i
			break
		}
	}
	if cleared < 0 || cleared > 90 {
		t.Fatalf("steady 1500 q/s after a start from nothing: cleared after %d s, want within 90 s", cleared)
	}
	for range 60 {
		if al, ok := step(1500); ok {
			t.Fatalf("steady traffic after the clear: %+v", al)
		}
	}
	if al, ok := step(8000); !ok || !al.Raised || al.Baseline < 1200 {
		t.Fatalf("a flood over the learned normal: %+v %v, want raised over a baseline near 1500", al, ok)
	}
	// Raised over a known normal: the baseline stands, the flood does
	// not become the normal however steady.
	for i := range 600 {
		if al, ok := step(8000); ok {
			t.Fatalf("a steady flood over a known normal cleared after %d s: %+v", i, al)
		}
	}
	if al, ok := step(1500); ok {
		t.Fatalf("back to normal at once: %+v, want ClearAfter first", al)
	}
}

// TestSourcesApart: the responder's queries and those dnstap reports
// are counted apart: a flood the responder sees is named from the
// responder's queries alone, one dnstap reports from dnstap's alone (and
// a VIP's, whose packets go to the resolvers, from dnstap's too); each
// share alarm is of one source's queries; the top views of each source
// hold only its own clients.
func TestSourcesApart(t *testing.T) {
	now := t0
	p := NewPipeline(Config{Alarms: AlarmConfig{Floor: 500, Rise: 4, Share: 0.5, ShareKinds: []Kind{KindClient}, ClearAfter: 3 * time.Second}}, now)
	gslbFlooder, resolverClient := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.9")
	spread := func(src Source, base byte, n int) {
		for i := range n {
			p.Observe(Query{Client: netip.AddrFrom4([4]byte{10, base, byte(i >> 8), byte(i)}), Name: "bg.example.", Type: dns.TypeA, Source: src})
		}
	}
	second := func(vip float64) []Alarm {
		now = now.Add(Epoch)
		return p.Step(now, map[string]float64{"vip dns": vip})
	}
	for range 5 {
		spread(SourceResponder, 1, 200)
		spread(SourceDnstap, 2, 200)
		if got := second(200); len(got) != 0 {
			t.Fatalf("background: %+v", got)
		}
	}
	// The responder is flooded by one client; dnstap's traffic stays as
	// it was, but for one resolver client that asks a lot.
	for range 2000 {
		p.Observe(Query{Client: gslbFlooder, Name: "www.gslb.example.", Type: dns.TypeA, Source: SourceResponder})
	}
	for range 900 {
		p.Observe(Query{Client: resolverClient, Name: "api.example.", Type: dns.TypeA, Source: SourceDnstap})
	}
	spread(SourceResponder, 1, 200)
	spread(SourceDnstap, 2, 200)
	got := second(4000)
	ids := map[string]Alarm{}
	for _, a := range got {
		ids[a.ID] = a
	}
	for _, id := range []string{"responder", "dnstap", "vip dns", "share responder clients 198.51.100.7", "share dnstap clients 203.0.113.9"} {
		if _, ok := ids[id]; !ok {
			t.Errorf("no alarm %q among %+v", id, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d alarms, want 5: %+v", len(got), got)
	}
	keys := func(a Alarm) string {
		var out []string
		for _, v := range a.Top {
			if v.Source != sourceOf(a.Source) {
				t.Errorf("alarm %s: a view of %s", a.ID, v.Source)
			}
			for _, e := range v.Entries {
				out = append(out, e.Key)
			}
		}
		return strings.Join(out, " ")
	}
	for id, a := range ids {
		k := keys(a)
		gslb, resolver := strings.Contains(k, "198.51.100.7"), strings.Contains(k, "203.0.113.9")
		if strings.Contains(id, "responder") && (!gslb || resolver) || !strings.Contains(id, "responder") && (gslb || !resolver) {
			t.Errorf("alarm %s names %s", id, k)
		}
	}
	for _, src := range []Source{SourceResponder, SourceDnstap} {
		v := p.Top(src, KindClient, 10*time.Second, 0)
		other := map[Source]string{SourceResponder: "203.0.113.9", SourceDnstap: "198.51.100.7"}[src]
		if hasKey(v, other) || v.Source != src || len(v.Entries) == 0 {
			t.Errorf("top clients of %s: %+v", src, v.Entries[:min(3, len(v.Entries))])
		}
	}
}
