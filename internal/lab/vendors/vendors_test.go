package vendors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/internal/lab/dnstest"
)

// query sends one UDP query with the given timeout.
func query(p *Process, name string, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Query(ctx, name, qtype)
}

// randomName returns a name under the upstream's zone that no one asked for
// before, so no cache can answer it.
func randomName(up *dnstest.Server) string {
	return up.Name(fmt.Sprintf("r%016x", rand.Uint64()))
}

func isTimeout(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

// describe renders an exchange's outcome for logs.
func describe(r *dns.Msg, err error) string {
	if err != nil {
		if isTimeout(err) {
			return "timeout"
		}
		return err.Error()
	}
	return dns.RcodeToString[r.Rcode]
}

// checkWWW asserts that p answers www.<zone> A with dnstest.DefaultA.
func checkWWW(t *testing.T, p *Process, up *dnstest.Server) {
	t.Helper()
	r, err := query(p, up.Name("www"), dns.TypeA, 3*time.Second)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.Vendor, err, p.Log())
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s: www A: got %s with %v, want NOERROR with one A\n%s", p.Vendor, dns.RcodeToString[r.Rcode], r.Answer, p.Log())
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok || a.A.String() != dnstest.DefaultA {
		t.Fatalf("%s: www A: answer %v, want %s", p.Vendor, r.Answer[0], dnstest.DefaultA)
	}
}

// TestUpstreamOutage checks, for every vendor, the behaviour the notes
// describe: it forwards to the upstream, and while the upstream is down
// (killed: its port refuses; or frozen: it reads queries and never answers)
// it still serves a cached name but fails a fresh one (SERVFAIL or no
// answer), and it resolves fresh names again once the upstream is back.
func TestUpstreamOutage(t *testing.T) {
	outages := []struct {
		name       string
		down, back func(*dnstest.Server) error
	}{
		{"killed", (*dnstest.Server).Stop, (*dnstest.Server).Restart},
		{"frozen", func(s *dnstest.Server) error { s.Freeze(); return nil }, func(s *dnstest.Server) error { s.Thaw(); return nil }},
	}
	for _, v := range All() {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			p := Start(t, v, up.Addr())

			checkWWW(t, p, up)
			name := randomName(up)
			r, err := query(p, name, dns.TypeA, 3*time.Second)
			if err != nil || r.Rcode != dns.RcodeNameError {
				t.Fatalf("fresh name with upstream up: %s, want NXDOMAIN\n%s", describe(r, err), p.Log())
			}
			if got := up.Count(name); got < 1 {
				t.Fatalf("upstream saw %d queries for %s, want at least 1", got, name)
			}

			// Sequential: the outages share the process and the upstream.
			for _, o := range outages {
				if err := o.down(up); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				r, err = query(p, randomName(up), dns.TypeA, 3*time.Second)
				switch {
				case err != nil && isTimeout(err):
				case err == nil && r.Rcode == dns.RcodeServerFailure:
				default:
					t.Fatalf("%s upstream: fresh name: %s, want SERVFAIL or timeout\n%s", o.name, describe(r, err), p.Log())
				}
				t.Logf("%s: upstream %s: fresh name: %s after %v", v, o.name, describe(r, err), time.Since(start).Round(time.Millisecond))
				checkWWW(t, p, up) // cached, unexpired: still served

				if err := o.back(up); err != nil {
					t.Fatal(err)
				}
				start = time.Now()
				deadline := start.Add(40 * time.Second)
				for {
					r, err = query(p, randomName(up), dns.TypeA, time.Second)
					if err == nil && r.Rcode == dns.RcodeNameError {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s upstream: not recovered 40 s after it came back, last: %s\n%s", o.name, describe(r, err), p.Log())
					}
					time.Sleep(250 * time.Millisecond)
				}
				t.Logf("%s: upstream %s: recovered %v after it came back", v, o.name, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestProcessControl checks Freeze, Thaw, Kill and Restart for every vendor.
func TestProcessControl(t *testing.T) {
	for _, v := range All() {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			p := Start(t, v, up.Addr())
			addr := p.Addr
			checkWWW(t, p, up)

			if err := p.Freeze(); err != nil {
				t.Fatal(err)
			}
			if r, err := query(p, up.Name("www"), dns.TypeA, 300*time.Millisecond); !isTimeout(err) {
				t.Fatalf("frozen: %s, want timeout", describe(r, err))
			}
			if err := p.Thaw(); err != nil {
				t.Fatal(err)
			}
			checkWWW(t, p, up)

			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			if p.Running() {
				t.Fatal("Running() after Kill = true")
			}
			if r, err := query(p, up.Name("www"), dns.TypeA, time.Second); err == nil {
				t.Fatalf("killed: got an answer %s", describe(r, err))
			}
			if err := p.Freeze(); err == nil {
				t.Fatal("Freeze of a killed process: no error")
			}
			if err := p.Kill(); err != nil {
				t.Fatalf("second Kill: %v", err)
			}

			if err := p.Restart(t); err != nil {
				t.Fatalf("Restart: %v\n%s", err, p.Log())
			}
			if p.Addr != addr {
				t.Fatalf("Addr after Restart = %v, want %v", p.Addr, addr)
			}
			checkWWW(t, p, up)
		})
	}
}

// TestAllAtOnce runs the five products side by side on distinct ports in
// front of one upstream, as a mixed-vendor pool would be.
func TestAllAtOnce(t *testing.T) {
	up := dnstest.NewServer(t)
	procs := make([]*Process, len(All()))
	for i, v := range All() {
		// Started one after the other on the test's goroutine (Start may
		// call t.Fatal); all run at the same time afterwards.
		if _, err := LookPath(v); err != nil && !required() {
			continue
		}
		procs[i] = Start(t, v, up.Addr())
	}
	ports := make(map[uint16]Vendor)
	for i, v := range All() {
		p := procs[i]
		if p == nil {
			t.Logf("%s: not installed, left out", v)
			continue
		}
		if other, dup := ports[p.Addr.Port()]; dup {
			t.Fatalf("%s and %s share port %d", v, other, p.Addr.Port())
		}
		ports[p.Addr.Port()] = v
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		checkWWW(t, p, up)
		// A name per vendor shows each one reached the shared upstream.
		name := up.Name("only-" + string(p.Vendor))
		r, err := query(p, name, dns.TypeA, 3*time.Second)
		if err != nil || r.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: %s: %s, want NXDOMAIN", p.Vendor, name, describe(r, err))
		}
		if got := up.Count(name); got < 1 {
			t.Errorf("%s: upstream saw %d queries for %s, want at least 1", p.Vendor, got, name)
		}
	}
}

// TestPrefetchOptionStarts checks that every product starts and answers
// with its native prefetch switched on.
func TestPrefetchOptionStarts(t *testing.T) {
	for _, v := range All() {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			p := StartWith(t, v, up.Addr(), Options{Prefetch: true})
			checkWWW(t, p, up)
		})
	}
}

// TestIdentity logs each product's CHAOS identity answers and checks them
// against what the notes (shared/notes/resolver-vendors.md) recorded. The
// version numbers follow Debian's packages, so only prefixes are checked.
func TestIdentity(t *testing.T) {
	tests := []struct {
		vendor  Vendor
		rcode   int
		version string // prefix of the version.bind TXT, "" for no TXT
	}{
		{Unbound, dns.RcodeSuccess, "unbound "},
		{BIND, dns.RcodeSuccess, "9."},
		{Knot, dns.RcodeServerFailure, ""},
		{PowerDNS, dns.RcodeSuccess, "PowerDNS Recursor "},
		{Dnsmasq, dns.RcodeSuccess, "dnsmasq-"},
	}
	for _, tc := range tests {
		t.Run(string(tc.vendor), func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			p := Start(t, tc.vendor, up.Addr())
			answers := make(map[string]string)
			for _, name := range []string{"version.bind.", "id.server.", "version.server."} {
				c := &dns.Client{Timeout: 2 * time.Second}
				q := new(dns.Msg)
				q.SetQuestion(name, dns.TypeTXT)
				q.Question[0].Qclass = dns.ClassCHAOS
				r, _, err := c.Exchange(q, p.Addr.String())
				if err != nil {
					answers[name] = err.Error()
					continue
				}
				var txt []string
				for _, rr := range r.Answer {
					if tr, ok := rr.(*dns.TXT); ok {
						txt = append(txt, strings.Join(tr.Txt, ""))
					}
				}
				answers[name] = dns.RcodeToString[r.Rcode] + " " + fmt.Sprintf("%q", txt)
				if name == "version.bind." {
					if r.Rcode != tc.rcode {
						t.Errorf("version.bind rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
					}
					switch {
					case tc.version == "" && len(txt) != 0:
						t.Errorf("version.bind = %q, want no TXT", txt)
					case tc.version != "" && (len(txt) != 1 || !strings.HasPrefix(txt[0], tc.version)):
						t.Errorf("version.bind = %q, want one starting with %q", txt, tc.version)
					}
				}
			}
			t.Logf("%s: version.bind %s; id.server %s; version.server %s", tc.vendor,
				answers["version.bind."], answers["id.server."], answers["version.server."])
		})
	}
}

func TestUnknownVendor(t *testing.T) {
	if _, err := LookPath("nosuch"); err == nil {
		t.Fatal("LookPath(nosuch): no error")
	}
	if got := Vendor("nosuch").Binary(); got != "" {
		t.Fatalf("Binary() = %q, want empty", got)
	}
	want := map[Vendor]string{Unbound: "unbound", BIND: "named", Knot: "kresd", PowerDNS: "pdns_recursor", Dnsmasq: "dnsmasq"}
	for _, v := range All() {
		if got := v.Binary(); got != want[v] {
			t.Errorf("%s.Binary() = %q, want %q", v, got, want[v])
		}
	}
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp4", "tcp4"} {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if network == "udp4" {
			c, err := net.ListenPacket(network, addr)
			if err != nil {
				t.Fatalf("%s %s: %v", network, addr, err)
			}
			c.Close()
			continue
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", network, addr, err)
		}
		l.Close()
	}
}
