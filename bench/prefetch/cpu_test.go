package prefetchbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lbdns/prefetch"

	"github.com/miekg/dns"
)

const (
	benchNames     = 1000
	benchResolvers = 5
	benchTTL       = 30
)

func seconds(env string, def int) time.Duration {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 && v <= 600 {
		return time.Duration(v) * time.Second
	}
	return time.Duration(def) * time.Second
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMain runs the fake resolvers when the test binary is started as the
// child (LBDNS_PREFETCH_RESPONDER=1), else the tests.
func TestMain(m *testing.M) {
	if os.Getenv("LBDNS_PREFETCH_RESPONDER") == "1" {
		os.Exit(responders())
	}
	os.Exit(m.Run())
}

// fakeResolver is a caching resolver model: each name's entry lives
// benchTTL whole seconds from its fetch. window > 0 models BIND's prefetch
// (a query in the last window seconds refreshes the entry).
type fakeResolver struct {
	mu      sync.Mutex
	window  int64
	expires map[string]int64
	fetches int
}

func (f *fakeResolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	now := time.Now().Unix()
	f.mu.Lock()
	exp, ok := f.expires[q.Name]
	if !ok || now >= exp {
		exp = now + benchTTL
		f.expires[q.Name] = exp
		f.fetches++
	}
	ttl := exp - now
	if f.window > 0 && ttl <= f.window {
		f.expires[q.Name] = now + benchTTL // background refresh
		f.fetches++
	}
	f.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: uint32(ttl)}, A: net.IPv4(192, 0, 2, 1)})
	w.WriteMsg(m)
}

// responders serves benchResolvers fake resolvers on loopback, prints
// "ADDR window" lines then "ready", and at EOF on stdin prints the fetch
// counts and exits.
func responders() int {
	var fakes []*fakeResolver
	var servers []*dns.Server
	for i := range benchResolvers {
		f := &fakeResolver{expires: map[string]int64{}}
		if i < 2 {
			f.window = 2
		}
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s := &dns.Server{PacketConn: pc, Handler: f}
		go s.ActivateAndServe()
		fakes, servers = append(fakes, f), append(servers, s)
		fmt.Printf("%s %d\n", pc.LocalAddr(), f.window)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	for _, f := range fakes {
		f.mu.Lock()
		fmt.Printf("fetches %d\n", f.fetches)
		f.mu.Unlock()
	}
	for _, s := range servers {
		s.Shutdown()
	}
	return 0
}

// TestCPU keeps 1,000 names × 5 resolvers (2 window-mode, 3 expiry-mode)
// warm at TTL 30 s and prints the runner's CPU use in steady state.
func TestCPU(t *testing.T) {
	if os.Getenv("LBDNS_BENCH_PREFETCH") != "1" {
		t.Skip("set LBDNS_BENCH_PREFETCH=1 (bench/prefetch/run.sh)")
	}
	warm := seconds("LBDNS_PREFETCH_CPU_WARM", 35)
	measure := seconds("LBDNS_PREFETCH_CPU_SECONDS", 60)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LBDNS_PREFETCH_RESPONDER=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	sc := bufio.NewScanner(stdout)
	var specs []prefetch.Spec
	for i := 0; sc.Scan() && sc.Text() != "ready"; i++ {
		f := strings.Fields(sc.Text())
		addr := netip.MustParseAddrPort(f[0])
		pol := prefetch.PolicyFor("dnsmasq", "expiry", 0, 0)
		if f[1] != "0" {
			pol = prefetch.PolicyFor("bind", "window", 2*time.Second, 0)
		}
		for n := range benchNames {
			specs = append(specs, prefetch.Spec{Key: prefetch.Key{Name: fmt.Sprintf("n%04d.bench.example.", n), Type: dns.TypeA, Resolver: "r" + strconv.Itoa(i)}, Addr: addr, Policy: pol})
		}
	}
	// needed: 2,000 window entries × 2 / 30 s + 3,000 expiry entries / 30 s = 233 q/s
	r := prefetch.New(prefetch.Options{MaxQPS: 1000, Jitter: 100 * time.Millisecond})
	r.Update(specs)
	healthy := map[string]bool{}
	for i := range benchResolvers {
		healthy["r"+strconv.Itoa(i)] = true
	}
	r.SetHealthy(healthy)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(warm)
	c0, t0, q0 := cpuTime(), time.Now(), r.Totals()
	time.Sleep(measure)
	c1, t1, q1 := cpuTime(), time.Now(), r.Totals()
	cancel()
	<-done
	stdin.Write([]byte("\n"))
	stdin.Close()
	var fetches []string
	for sc.Scan() {
		fetches = append(fetches, strings.TrimPrefix(sc.Text(), "fetches "))
	}
	el := t1.Sub(t0)
	cpu := c1 - c0
	t.Logf("%d entries (%d names × %d resolvers, 2 window + 3 expiry), TTL %ds, measured %v after %v warm-up",
		len(specs), benchNames, benchResolvers, benchTTL, el.Round(time.Second), warm)
	t.Logf("runner CPU: %v in %v = %.2f%% of one core; %.0f queries/s; %.1f µs CPU per query",
		cpu.Round(time.Millisecond), el.Round(time.Second), 100*cpu.Seconds()/el.Seconds(),
		float64(q1.Queries-q0.Queries)/el.Seconds(), float64(cpu.Microseconds())/float64(max(1, q1.Queries-q0.Queries)))
	t.Logf("failures %d, found expired %d during the measurement", q1.Failures-q0.Failures, q1.FoundExpired-q0.FoundExpired)
	t.Logf("upstream fetches per resolver over the whole run (%v): %s (one per TTL would be %d)",
		(warm + measure).Round(time.Second), strings.Join(fetches, ", "), int((warm+measure).Seconds()/benchTTL+1)*benchNames)
	var late int
	for _, st := range r.Snapshot() {
		if st.Counters.Failures > 0 {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d entries had failures", late)
	}
}
