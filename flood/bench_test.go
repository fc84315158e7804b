package flood

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkAddMessage is the cost a responder's reader pays per query
// counted: the lock, the name's copy into the batch.
func BenchmarkAddMessage(b *testing.B) {
	in := NewIntake()
	p := in.NewProducer(SourceResponder)
	msg, _ := new(dns.Msg).SetQuestion("www.app.gslb.example.com.", dns.TypeA).Pack()
	reply := append([]byte(nil), msg...)
	client := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.AddMessage(client, msg, reply)
		if i++; i == batchRecords {
			// A drainer that keeps up, off the clock.
			b.StopTimer()
			in.Drain(func(*batch) {})
			b.StartTimer()
			i = 0
		}
	}
}

// BenchmarkTrackerAdd is the drainer's cost per query: five summaries,
// on Zipf-distributed clients (of 100,000) and names (of 10,000), as
// DNS traffic is: "every" counts every query in the summaries, the
// others sample beyond the default Full at the rate they name (an epoch
// rotated every so many queries).
func BenchmarkTrackerAdd(b *testing.B) {
	for _, c := range []struct {
		name string
		full int
		rate int
	}{{"every", -1, 1 << 30}, {"20kqps", 0, 20000}, {"50kqps", 0, 50000}, {"200kqps", 0, 200000}, {"1Mqps", 0, 1000000}} {
		b.Run(c.name, func(b *testing.B) { benchTrackerAdd(b, c.full, c.rate) })
	}
}

func benchTrackerAdd(b *testing.B, full, rate int) {
	tr := NewTracker(TrackerConfig{Zones: []string{"gslb.example.com"}, Full: full}, t0)
	now := t0
	in := NewIntake()
	p := in.NewProducer(SourceResponder)
	r := rand.New(rand.NewPCG(1, 2))
	zc := rand.NewZipf(r, 1.1, 1, 99999)
	zn := rand.NewZipf(r, 1.1, 1, 9999)
	const n = 1 << 16
	msgs := make([][]byte, n)
	clients := make([]netip.Addr, n)
	for i := range msgs {
		msgs[i], _ = new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.gslb.example.com.", zn.Uint64()), dns.TypeA).Pack()
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(zc.Uint64()))
		clients[i] = netip.AddrFrom4(a)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.AddMessage(clients[i%n], msgs[i%n], nil)
		if i++; i%batchRecords == 0 {
			in.Drain(tr.addBatch)
		}
		if i%rate == 0 {
			now = now.Add(Epoch)
			tr.Rotate(now)
		}
	}
}

// TestMemoryBound fills every summary of a tracker of the default size
// with distinct keys of the longest names for more than the long
// window, and checks the heap they take against the goal of 16 MiB.
func TestMemoryBound(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("fills the summaries with millions of keys: not in -short, nor under -race")
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	cfg := TrackerConfig{Zones: []string{"gslb.example.com"}, Full: -1}
	tr := NewTracker(cfg, t0)
	// 70 s at 20,000 queries a second, every one a new client and a
	// new name of 250 octets whose last two labels (its suffix, under
	// no zone) are new too: 1.4 million distinct keys of each kind.
	label := strings.Repeat("a", 63)
	name := func(i int) string {
		return label + "." + label + "." + fmt.Sprintf("%08x", i) + label[8:] + "." + label[:57] + "."
	}
	if n := len(name(0)); n != 250 {
		t.Fatalf("names of %d octets, want 250", n)
	}
	now := t0
	i := 0
	for range 70 {
		for range 20000 {
			var a [16]byte
			binary.BigEndian.PutUint64(a[8:], uint64(i))
			binary.BigEndian.PutUint32(a[:], uint32(i))
			tr.Add(Query{Client: netip.AddrFrom16(a), Name: name(i), Type: dns.TypeA})
			i++
		}
		now = now.Add(Epoch)
		tr.Rotate(now)
	}
	used := heap() - before
	runtime.KeepAlive(tr)
	t.Logf("summaries of %d counters, %d per kind: %.1f MiB after %d distinct keys", cfg.withDefaults().Counters, cfg.Summaries(), float64(used)/(1<<20), i)
	if used > 16<<20 {
		t.Errorf("heap %.1f MiB, want at most 16 MiB", float64(used)/(1<<20))
	}
}
