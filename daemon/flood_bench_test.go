package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"lbdns/flood"
)

// BenchmarkFloodDetection measures the delay from a flood's first query
// to the alarm that names its client and name, through the real
// responder on loopback and the daemon's flood goroutine: a background
// of LBDNS_FLOOD_BG_QPS queries a second (default 50000) from 20
// clients for 20 names, then one client (127.0.0.99, 4 sockets) asking
// one name at 1.5 times the background counted, once per iteration (run it with
// -benchtime Nx). [flood]: floor 1.5 times the background counted
// (set by a reload once it is measured), rise 2.
// It reports the mean and the largest delay, and the background and
// flood rates the responder counted (on a loaded host they fall short of
// those asked).
func BenchmarkFloodDetection(b *testing.B) {
	bg := 50000
	if s := os.Getenv("LBDNS_FLOOD_BG_QPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2000 {
			b.Fatalf("LBDNS_FLOOD_BG_QPS=%q: want at least 2000", s)
		}
		bg = n
	}
	dir := b.TempDir()
	port := freePort(b)
	doc := func(floor int) []byte {
		return []byte(fmt.Sprintf(gslbOnly, dir) + fmt.Sprintf(twoMembers, "1s", port) + manyNames(20) +
			fmt.Sprintf("\n[flood]\nfloor = %d\nrise = 2\nbaseline = \"10s\"\nclear_after = \"1s\"\nshare_percent = 0\n", floor))
	}
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, doc(bg*6/5), 0o644); err != nil {
		b.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Probe: fp.probe, Identify: noIdentify, TickInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	run(b, d, fp, nil)
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	for deadline := time.Now().Add(10 * time.Second); len(askA(b, addr.String(), "n0.gslb.example.")) != 2; {
		if time.Now().After(deadline) {
			b.Fatal("the GSLB names are not answered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%d.gslb.example.", i))
	}
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stopBG); wg.Wait() }()
	per := max(1, bg/100/20) // per socket per 10 ms
	for i := range 20 {
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		mine := append(slices.Clone(names[i:]), names[:i]...)
		wg.Go(func() { floodSender(b, addr, from, mine, 10*time.Millisecond, per, per*100*600, stopBG) })
	}
	responderRate := func() float64 {
		for _, r := range d.Flood().Counters().Rates {
			if r.Source == "responder" {
				return r.Rate
			}
		}
		return 0
	}
	// The baseline (10 s), and the background the host could send:
	// the floor, 1.5 times its largest second, is set by a reload.
	time.Sleep(10 * time.Second)
	var bgRate float64
	for range 4 {
		time.Sleep(time.Second)
		bgRate = max(bgRate, responderRate())
	}
	if err := os.WriteFile(path, doc(int(bgRate*1.5)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := d.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	var total, worst time.Duration
	var floodRate float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stop := make(chan struct{})
		var fw sync.WaitGroup
		fper := max(1, int(bgRate)*3/2/100/4) // 1.5 times the background counted
		start := time.Now()
		for range 4 {
			fw.Go(func() {
				floodSender(b, addr, netip.MustParseAddr("127.0.0.99"), []string{"n7.gslb.example."}, 10*time.Millisecond, fper, fper*100*10, stop)
			})
		}
		var alarm *flood.Alarm
		for alarm == nil && time.Since(start) < 10*time.Second {
			time.Sleep(5 * time.Millisecond)
			for _, a := range d.Flood().Active() {
				if a.ID == "responder" {
					alarm = &a
				}
			}
		}
		delay := time.Since(start)
		close(stop)
		fw.Wait()
		if alarm == nil {
			b.Fatalf("no alarm within 10 s of the flood (responder at %.0f/s, background %.0f/s)", responderRate(), bgRate)
		}
		if len(alarm.Top) < 3 || alarm.Top[0].Entries[0].Key != "127.0.0.99" || alarm.Top[2].Entries[0].Key != "n7.gslb.example." {
			b.Errorf("the alarm does not name the flood's client and name first: %+v", alarm.Top)
		}
		total += delay
		worst = max(worst, delay)
		floodRate += (alarm.Rate - bgRate) / float64(b.N) // the second that raised it
		b.StopTimer()
		for deadline := time.Now().Add(20 * time.Second); len(d.Flood().Active()) > 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "delay-ms")
	b.ReportMetric(float64(worst.Milliseconds()), "max-delay-ms")
	b.ReportMetric(bgRate, "bg-qps")
	b.ReportMetric(floodRate, "flood-qps") // mean, in the seconds that raised the alarms
}
