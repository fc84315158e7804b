package flood

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestSuffix(t *testing.T) {
	s := NewSuffixer([]string{"gslb.example.com", "Other.Example.NET."})
	for name, want := range map[string]string{
		"www.app.gslb.example.com.": "app.gslb.example.com.",
		"app.gslb.example.com.":     "app.gslb.example.com.",
		"gslb.example.com.":         "gslb.example.com.",
		"a.b.other.example.net.":    "b.other.example.net.",
		"www.example.com.":          "example.com.",
		"xgslb.example.com.":        "example.com.",
		"www.example.co.uk.":        "co.uk.",
		"com.":                      "com.",
		".":                         ".",
	} {
		if got := s.Suffix(name); got != want {
			t.Errorf("Suffix(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPrefixAndKind(t *testing.T) {
	for a, want := range map[string]string{
		"192.0.2.77":        "192.0.2.0/24",
		"::ffff:192.0.2.77": "192.0.2.0/24",
		"2001:db8:1:2ff::1": "2001:db8:1:200::/56",
		"fe80::1%eth0":      "fe80::/56",
	} {
		if got := Prefix(netip.MustParseAddr(a)).String(); got != want {
			t.Errorf("Prefix(%s) = %s, want %s", a, got, want)
		}
		// The tracker counts the client under that prefix.
		tr := NewTracker(TrackerConfig{}, t0)
		tr.Add(Query{Client: netip.MustParseAddr(a)})
		tr.Rotate(t0.Add(Epoch))
		if v := tr.View(KindPrefix, Epoch, 0); len(v.Entries) != 1 || v.Entries[0].Key != want {
			t.Errorf("%s counted under %+v, want %s", a, v.Entries, want)
		}
	}
	for _, s := range []string{"clients", "client", "prefix", "names", "suffixes", "suffix", "nametypes"} {
		if _, err := ParseKind(s); err != nil {
			t.Errorf("ParseKind(%q): %v", s, err)
		}
	}
	if _, err := ParseKind("talkers"); err == nil {
		t.Error("ParseKind(talkers): no error")
	}
}

func TestWireName(t *testing.T) {
	for _, tc := range []struct{ wire, want string }{
		{"", "."},
		{"\x03Www\x07EXAMPLE\x03com", "www.example.com."},
		{"\x01a\x00", "a.."},                 // an empty label, as written
		{"\x03a.b\x02zZ", "a.b.zz."},         // a dot in a label, kept
		{"\x05ab", "ab."},                    // cut short
		{"\x02\xc3\x89\x01@", "\xc3\x89.@."}, // bytes beyond ASCII letters, kept
	} {
		if got := string(appendWireName([]byte("x"), []byte(tc.wire))); got != "x"+tc.want {
			t.Errorf("appendWireName(%q) = %q, want %q", tc.wire, got, "x"+tc.want)
		}
	}
}

func TestTrackerWindows(t *testing.T) {
	tr := NewTracker(TrackerConfig{Counters: 16, Zones: []string{"gslb.example.com"}}, t0)
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("2001:db8::1")
	// Second s counts s+1 queries from a for www.gslb.example.com
	// and one from b for b.example.org.
	now := t0
	for s := range 70 {
		for range s + 1 {
			tr.Add(Query{Client: a, Name: "WWW.gslb.example.com", Type: dns.TypeA, Rcode: dns.RcodeSuccess})
		}
		tr.Add(Query{Client: b, Name: "b.example.org.", Type: dns.TypeAAAA, Rcode: NoRcode, Source: SourceDnstap})
		now = now.Add(Epoch)
		closed := tr.Rotate(now)
		if len(closed) != 1 || closed[0].Queries != uint64(s+2) || !closed[0].Start.Equal(now.Add(-Epoch)) {
			t.Fatalf("second %d: closed %+v", s, closed)
		}
	}
	// After second 69 closed: the last 10 s are seconds 60..69.
	v := tr.View(KindClient, 10*time.Second, 0)
	var wantA uint64
	for s := 60; s < 70; s++ {
		wantA += uint64(s + 1)
	}
	if v.Seconds() != 10 || len(v.Entries) != 2 || v.Entries[0].Key != "192.0.2.1" || v.Entries[0].Count != wantA || v.Entries[1].Key != "2001:db8::1" || v.Entries[1].Count != 10 {
		t.Fatalf("10s view: %+v", v)
	}
	if v.Queries != wantA+10 || v.Rcodes[dns.RcodeSuccess] != wantA || v.Rcodes[16] != 10 {
		t.Errorf("10s view totals: %d queries, rcodes %v", v.Queries, v.Rcodes)
	}
	if want := float64(wantA) / 10; v.Entries[0].Rate != want {
		t.Errorf("rate %v, want %v", v.Entries[0].Rate, want)
	}
	// The long window: 60 s of the 70 (whole slabs of 10).
	v = tr.View(KindPrefix, time.Minute, 0)
	wantA = 0
	for s := 10; s < 70; s++ {
		wantA += uint64(s + 1)
	}
	if v.Seconds() != 60 || v.Entries[0].Key != "192.0.2.0/24" || v.Entries[0].Count != wantA || v.Entries[1].Key != "2001:db8::/56" {
		t.Fatalf("60s view: %+v", v)
	}
	for kind, want := range map[Kind]string{KindName: "www.gslb.example.com.", KindSuffix: "www.gslb.example.com.", KindNameType: "www.gslb.example.com. A"} {
		if got := tr.View(kind, 10*time.Second, 1).Entries[0].Key; got != want {
			t.Errorf("%s: top %q, want %q", kind, got, want)
		}
	}
	if got := tr.View(KindSuffix, 10*time.Second, 0).Entries[1].Key; got != "example.org." {
		t.Errorf("suffix of b.example.org.: %q", got)
	}
	// Memory stays bounded: the summaries in use and free.
	if n := len(tr.recent) + len(tr.slabs) + 1; n > tr.cfg.Summaries() {
		t.Errorf("%d periods kept, want at most %d", n, tr.cfg.Summaries())
	}
	// A quiet spell longer than the long window empties the views.
	tr.Rotate(now.Add(5 * time.Minute))
	if v := tr.View(KindClient, time.Minute, 0); v.Queries != 0 || len(v.Entries) != 0 || v.Seconds() != 60 {
		t.Errorf("after a quiet spell: %+v", v)
	}
}

func TestProducer(t *testing.T) {
	in := NewIntake()
	p := in.NewProducer(SourceResponder)
	client := netip.MustParseAddr("198.51.100.7")
	q := new(dns.Msg).SetQuestion("Www.Example.COM.", dns.TypeAAAA)
	q.SetEdns0(1232, false)
	msg, _ := q.Pack()
	r := new(dns.Msg).SetRcode(q, dns.RcodeNameError)
	reply, _ := r.Pack()
	p.AddMessage(client, msg, reply)
	p.AddMessage(client, msg, nil)
	p.AddMessage(client, msg[:11], nil)   // shorter than a header
	p.AddMessage(client, msg[:20], reply) // name cut short
	p.Add(Query{Client: client, Name: "other.example.", Type: dns.TypeA, Rcode: 0})

	tr := NewTracker(TrackerConfig{}, t0)
	seen := in.Drain(tr.addBatch)
	if seen[SourceResponder] != 5 {
		t.Errorf("seen %d, want 5", seen)
	}
	tr.Rotate(t0.Add(Epoch))
	v := tr.View(KindNameType, 10*time.Second, 0)
	if v.Queries != 3 || len(v.Entries) != 2 || v.Entries[0].Key != "www.example.com. AAAA" || v.Entries[0].Count != 2 {
		t.Errorf("name types: %+v", v)
	}
	if v.Rcodes[dns.RcodeNameError] != 2 || v.Rcodes[16] != 2 || v.Rcodes[0] != 1 {
		t.Errorf("rcodes %v", v.Rcodes)
	}
	if v := tr.View(KindClient, 10*time.Second, 0); v.Queries != 5 || v.Entries[0].Count != 5 {
		t.Errorf("clients: %+v", v)
	}

	// With the drainer away, a producer fills its batches and then
	// drops, counting what it dropped; the totals still count all.
	n := producerBatchs*batchRecords + 100
	for range n {
		p.AddMessage(client, msg, reply)
	}
	if in.Dropped() != 100 {
		t.Errorf("dropped %d, want 100", in.Dropped())
	}
	var recorded int
	seen = in.Drain(func(b *batch) { recorded += len(b.recs) })
	if seen[SourceResponder] != uint64(n) || recorded != n-100 {
		t.Errorf("seen %d recorded %d, want %d and %d", seen, recorded, n, n-100)
	}
	select {
	case <-in.Wake():
	default:
		t.Error("no wake-up for full batches")
	}
	p.Close()
	p.Add(Query{Name: "x."})
	if in.Drain(func(*batch) {})[SourceResponder] != 0 {
		t.Error("a closed producer still counts")
	}
	// Producers that come and go (a reload restarts the readers) leave
	// no batches behind: the spares of those left, no more.
	for range 50 {
		q := in.NewProducer(SourceResponder)
		for range batchRecords + 1 {
			q.AddMessage(client, msg, reply) // a full batch waits for the drainer
		}
		q.Close()
	}
	keep := in.NewProducer(SourceDnstap)
	in.Drain(func(*batch) {})
	if n := len(in.free); n > producerBatchs-1 {
		t.Errorf("%d free batches for one producer, want at most %d", n, producerBatchs-1)
	}
	keep.Close()
}

func TestAddMessageAllocs(t *testing.T) {
	in := NewIntake()
	p := in.NewProducer(SourceResponder)
	msg, _ := new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA).Pack()
	client := netip.MustParseAddr("192.0.2.1")
	if n := testing.AllocsPerRun(1000, func() { p.AddMessage(client, msg, msg) }); n != 0 {
		t.Errorf("AddMessage: %v allocs, want 0", n)
	}
}

// TestSampling: beyond Full queries a second, the summaries count a
// sample with its weight: a key's estimate stays near its true count,
// the totals exact.
func TestSampling(t *testing.T) {
	tr := NewTracker(TrackerConfig{Full: 1000}, t0)
	flooder := netip.MustParseAddr("192.0.2.66")
	const n = 64000
	for i := range n {
		c := flooder
		if i%2 == 1 {
			c = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		}
		tr.Add(Query{Client: c, Name: "x.example.", Type: dns.TypeA})
	}
	if tr.Stride() < 32 {
		t.Errorf("stride %d after %d queries at Full 1000", tr.Stride(), n)
	}
	tr.Rotate(t0.Add(Epoch))
	if tr.Stride() != 64 {
		t.Errorf("next epoch's stride %d, want 64 (64000 q/s over 1000)", tr.Stride())
	}
	v := tr.View(KindClient, Epoch, 1)
	if v.Queries < n*9/10 || v.Queries > n*11/10 {
		t.Errorf("sampled N %d, want about %d", v.Queries, n)
	}
	if e := v.Entries[0]; e.Key != "192.0.2.66" || e.Count < n/2*9/10 || e.Count > n/2*11/10 {
		t.Errorf("flooder %+v, want about %d", e, n/2)
	}
	if v.Rcodes[0] != n {
		t.Errorf("rcodes %d, want every query: %d", v.Rcodes[0], n)
	}
}

// TestTrackerHashes: the tracker hashes a name once for the name, its
// suffix (when the name is its own suffix) and its (name, type); each
// summary finds that key again by its own hash (as Add and fold do),
// under the one counter.
func TestTrackerHashes(t *testing.T) {
	tr := NewTracker(TrackerConfig{Zones: []string{"gslb.example.com"}}, t0)
	const name = "app.gslb.example.com."
	tr.Add(Query{Client: netip.MustParseAddr("192.0.2.1"), Name: name, Type: dns.TypeAAAA})
	for kind, key := range map[Kind]string{KindName: name, KindSuffix: name, KindNameType: name + "\x00\x1c"} {
		s := tr.cur.sums[kind]
		s.Add(key, 1)
		if e := s.Entries(); len(e) != 1 || e[0].Key != key || e[0].Est != 2 {
			t.Errorf("%s: entries %+v, want %q counted twice", kind, e, key)
		}
	}
}

func TestLower(t *testing.T) {
	var all, want []byte
	for c := range 256 {
		all = append(all, byte(c))
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		want = append(want, byte(c))
	}
	for off := range 8 {
		b := append([]byte(nil), all[off:]...)
		lower(b)
		if string(b) != string(want[off:]) {
			t.Errorf("lower from byte %d: %q, want %q", off, b, want[off:])
		}
	}
}

// TestAddBatchAllocs: once its summaries have grown (key buffers,
// buckets), the drainer counts a batch without allocating, new keys
// taking counters over all the while.
func TestAddBatchAllocs(t *testing.T) {
	in := NewIntake()
	p := in.NewProducer(SourceResponder)
	r := rand.New(rand.NewPCG(7, 8))
	zc := rand.NewZipf(r, 1.1, 1, 9999)
	zn := rand.NewZipf(r, 1.1, 1, 999)
	for range batchRecords {
		msg, _ := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.gslb.example.com.", zn.Uint64()), dns.TypeA).Pack()
		c := zc.Uint64()
		p.AddMessage(netip.AddrFrom4([4]byte{10, byte(c >> 16), byte(c >> 8), byte(c)}), msg, nil)
	}
	var b *batch
	in.Drain(func(x *batch) { b = &batch{recs: slices.Clone(x.recs), names: slices.Clone(x.names)} })
	tr := NewTracker(TrackerConfig{Counters: 64, Zones: []string{"gslb.example.com"}, Full: -1}, t0)
	for range 10 {
		tr.addBatch(b)
	}
	if n := testing.AllocsPerRun(20, func() { tr.addBatch(b) }); n != 0 {
		t.Errorf("%v allocations per batch of %d queries, want 0", n, len(b.recs))
	}
	if v := tr.cur.sums[KindClient]; v.Len() != 64 || v.Min() == 0 {
		t.Errorf("client summary: %d counters, min %d: want it full, keys taking counters over", v.Len(), v.Min())
	}
}
