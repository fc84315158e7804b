package intake

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/dnstap"
	"lbdns/internal/lab/dnstest"
	"lbdns/internal/lab/vendors"
)

// TestVendorsSendDnstap runs Debian's unbound, BIND and Knot Resolver
// with dnstap pointed at a Server (a Unix socket; unbound also over TCP;
// BIND also through socat relaying its Unix socket to TCP, as on a
// resolver host apart from lbdnsd), sends each queries from several
// loopback source addresses, and checks that every query and its
// response arrive decoded with the address, name, type and rcode that
// were sent, and the identity the product was given. Then it restarts
// the Server on the same addresses: the product reconnects and the next
// queries arrive too.
func TestVendorsSendDnstap(t *testing.T) {
	cases := []struct {
		vendor vendors.Vendor
		via    string // unix, tcp, relay (socat from a Unix socket to TCP)
	}{
		{vendors.Unbound, "unix"},
		{vendors.Unbound, "tcp"},
		{vendors.BIND, "unix"},
		{vendors.BIND, "relay"},
		{vendors.Knot, "unix"},
	}
	for _, tc := range cases {
		t.Run(string(tc.vendor)+"/"+tc.via, func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			f := start(t, Config{})
			identity := "lbdns-test-" + string(tc.vendor)
			d := &vendors.Dnstap{Unix: f.unix, Identity: identity}
			switch tc.via {
			case "tcp":
				d = &vendors.Dnstap{TCP: netip.MustParseAddrPort(f.tcp), Identity: identity}
			case "relay":
				d = &vendors.Dnstap{Unix: relay(t, f.tcp), Identity: identity}
			}
			p := vendors.StartWith(t, tc.vendor, up.Addr(), vendors.Options{Dnstap: d})
			exchange(t, p, up, f.sink, "first", identity)

			// lbdnsd restarts: the product reconnects by itself.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := f.srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			again := newSink()
			srv, err := New(Config{Unix: f.unix, TCP: f.tcp}, again.handle, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Shutdown(context.Background()) })
			exchange(t, p, up, again, "second", identity)
		})
	}
}

// exchange sends, from clients 127.0.0.2..4, a name that exists
// (NOERROR) and one that does not (NXDOMAIN) each, labelled with round,
// to p, and waits until sink holds a CLIENT_QUERY and a CLIENT_RESPONSE
// of each with the right client, name, type, rcode and identity. The
// products send dnstap asynchronously and reconnect on their own
// schedule, so the queries are sent again (to new names) every few
// seconds until they are seen or 60 s pass.
func exchange(t *testing.T, p *vendors.Process, up *dnstest.Server, sink *sink, round, identity string) {
	t.Helper()
	type sent struct {
		client netip.Addr
		name   string
		rcode  int
	}
	key := func(typ dnstap.Type, client netip.Addr, name string) string {
		return fmt.Sprintf("%v %s %s", typ, client, name)
	}
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 0; ; attempt++ {
		var want []sent
		for i := 2; i <= 4; i++ {
			client := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
			www := up.Name("www")
			missing := up.Name(fmt.Sprintf("%s-%d-c%d-missing", round, attempt, i))
			for _, q := range []struct {
				name  string
				rcode int
			}{{www, dns.RcodeSuccess}, {missing, dns.RcodeNameError}} {
				r := queryFrom(t, client, p.Addr, q.name)
				if r.Rcode != q.rcode {
					t.Fatalf("%s from %v: %s, want %s\n%s", q.name, client, dns.RcodeToString[r.Rcode], dns.RcodeToString[q.rcode], p.Log())
				}
				want = append(want, sent{client, strings.ToLower(q.name), q.rcode})
			}
		}
		retry := time.Now().Add(5 * time.Second)
		for {
			got := map[string]dnstap.Message{}
			for _, m := range sink.snapshot() {
				got[key(m.Type, m.Client, m.Name)] = m
			}
			missing := 0
			for _, w := range want {
				for _, typ := range []dnstap.Type{dnstap.ClientQuery, dnstap.ClientResponse} {
					m, ok := got[key(typ, w.client, w.name)]
					if !ok {
						missing++
						continue
					}
					check(t, m, identity, w.rcode)
				}
			}
			if missing == 0 {
				t.Logf("%s round: every message after %d sends; %d messages in all, version %q", round, attempt+1, len(got), sink.snapshot()[0].Version)
				return
			}
			if time.Now().After(deadline) {
				var keys []string
				for k := range got {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				t.Fatalf("%s round: %d of %d messages missing after 60 s; got:\n%s\n%s", round, missing, 2*len(want), strings.Join(keys, "\n"), p.Log())
			}
			if time.Now().After(retry) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// check fails t unless m is what a product sends for a client's A query
// (and its response with rcode).
func check(t *testing.T, m dnstap.Message, identity string, rcode int) {
	t.Helper()
	if m.Identity != identity {
		t.Errorf("identity %q, want %q (%+v)", m.Identity, identity, m)
	}
	if m.QType != dns.TypeA || m.QClass != dns.ClassINET || m.ClientPort == 0 || m.Time.IsZero() {
		t.Errorf("message %+v: want type A, class IN, a port and a time", m)
	}
	if d := time.Since(m.Time); d < -time.Minute || d > time.Minute {
		t.Errorf("message time %v, %v from now", m.Time, d)
	}
	switch m.Type {
	case dnstap.ClientQuery:
		if m.Rcode != -1 {
			t.Errorf("query with rcode %d: %+v", m.Rcode, m)
		}
	case dnstap.ClientResponse:
		if m.Rcode != rcode {
			t.Errorf("response with rcode %d, want %d: %+v", m.Rcode, rcode, m)
		}
	}
}

// queryFrom sends one UDP query for name A from the address client.
func queryFrom(t *testing.T, client netip.Addr, server netip.AddrPort, name string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: client.AsSlice()}}}
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, _, err := c.ExchangeContext(ctx, q, server.String())
	if err != nil {
		t.Fatalf("%s from %v: %v", name, client, err)
	}
	return r
}

// relay runs socat passing a new Unix socket's connections to tcp, one
// TCP connection each, and returns the socket's path. It skips the test
// without socat (fails it when LBDNS_REQUIRE_VENDORS=1 or CI=true).
func relay(t *testing.T, tcp string) string {
	t.Helper()
	bin, err := exec.LookPath("socat")
	if err != nil {
		if os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" || os.Getenv("CI") == "true" {
			t.Fatal("socat not found (run scripts/install-test-deps.sh)")
		}
		t.Skip("socat not found (run scripts/install-test-deps.sh)")
	}
	path := filepath.Join(t.TempDir(), "relay.sock")
	cmd := exec.Command(bin, "UNIX-LISTEN:"+path+",fork", "TCP:"+tcp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // socat and its forked children
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("socat made no socket within 10 s: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
