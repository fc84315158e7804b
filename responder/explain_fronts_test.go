package responder

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/responder/doh"
)

// frontsExplainConfig is explainConfig's zones with a DoH front (the
// JSON API at /resolve) and a DoT front on 127.0.0.1, trusting the
// proxy 127.0.0.1 only, with [gslb.tls] extra appended.
func frontsExplainConfig(t *testing.T, extra string) (*configs.Config, *x509.CertPool) {
	t.Helper()
	certFile, keyFile, pool := writeCert(t, t.TempDir(), "gslb-explain")
	doc := explainDoc(t, false) + fmt.Sprintf(`
[gslb.tls]
doh_listen = ["127.0.0.1:0"]
dot_listen = ["127.0.0.1:0"]
cert_file = %q
key_file = %q
trusted_proxies = ["127.0.0.1/32"]
%s`, certFile, keyFile, extra)
	cfg, err := configs.Parse([]byte(doc), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, pool
}

// httpFrom is an HTTP/2 client of the fronts whose connections come
// from the address from.
func httpFrom(t *testing.T, pool *x509.CertPool, from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// answers are the addresses of the A records of the DNS reply b.
func answers(t *testing.T, b []byte) []string {
	t.Helper()
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		t.Fatalf("reply: %v", err)
	}
	out := []string{}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// frontAsk is one request to a front as the test makes it.
type frontAsk struct {
	via, from, xff, proxy, ip, ecs string
}

// ask sends a over its front and returns the addresses answered and,
// for the JSON API, its status and location; err when the front
// refused (a status other than 200, a connection that failed).
func (a frontAsk) ask(t *testing.T, pool *x509.CertPool, dohAddr, dotAddr string) (addrs []string, loc doh.JSONLocation, status int, err error) {
	t.Helper()
	msg := query("www.gslb.test.", dns.TypeA, 1232)
	if a.ecs != "" {
		p := netip.MustParsePrefix(a.ecs)
		b := p.Addr().As4()
		msg = withECS(msg, append([]byte{0, 1, byte(p.Bits()), 0}, b[:(p.Bits()+7)/8]...))
	}
	q, _ := msg.Pack()
	switch a.via {
	case "json":
		v := "name=www.gslb.test"
		if a.ip != "" {
			v += "&ip=" + a.ip
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+dohAddr+"/resolve?"+v, nil)
		if a.xff != "" {
			req.Header.Set("X-Forwarded-For", a.xff)
		}
		resp, err := httpFrom(t, pool, a.from).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, loc, resp.StatusCode, fmt.Errorf("json api: %d %s", resp.StatusCode, body)
		}
		var jr doh.JSONReply
		if err := json.Unmarshal(body, &jr); err != nil {
			t.Fatal(err)
		}
		for _, r := range jr.Answer {
			addrs = append(addrs, r.Data)
		}
		return addrs, jr.Location, resp.StatusCode, nil
	case "doh":
		req, _ := http.NewRequest(http.MethodPost, "https://"+dohAddr+"/dns-query", bytes.NewReader(q))
		req.Header.Set("Content-Type", doh.MediaDNSMessage)
		if a.xff != "" {
			req.Header.Set("X-Forwarded-For", a.xff)
		}
		resp, err := httpFrom(t, pool, a.from).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, loc, resp.StatusCode, fmt.Errorf("doh: %d %s", resp.StatusCode, body)
		}
		return answers(t, body), loc, resp.StatusCode, nil
	default: // dot
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(a.from)}, Timeout: 5 * time.Second}
		raw, err := d.Dial("tcp", dotAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		if a.proxy != "" {
			raw.Write(doh.AppendProxyV2(nil, netip.AddrPortFrom(netip.MustParseAddr(a.proxy), 5353), netip.MustParseAddrPort(dotAddr)))
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"dot"}})
		if err := tc.Handshake(); err != nil {
			return nil, loc, 0, fmt.Errorf("dot: %w", err)
		}
		return answers(t, streamExchange(t, tc, q)), loc, 0, nil
	}
}

// TestExplainAgreesWithFronts: for the same inputs, what lbctl gslb
// explain says of a front (where it located the client, the answer, a
// refusal) is what the front, running, really does: X-Forwarded-For
// through the trusted proxy or not, a PROXY header from it or not, ip=
// without allow_client_ip, a DoH message's Client Subnet dropped.
func TestExplainAgreesWithFronts(t *testing.T) {
	cfg, pool := frontsExplainConfig(t, "proxy_protocol = true\n")
	r := NewResponder(ResponderOptions{})
	defer r.Stop(context.Background())
	if err := r.Update(cfg, gslb.Evaluate(cfg, states(health.Up, health.Up), time.Now())); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	dohA, dotA := r.srv.FrontAddrs()
	r.mu.Unlock()
	dohAddr, dotAddr := dohA[0].String(), dotA[0].String()
	east, west := []string{"192.0.2.1"}, []string{"192.0.2.2"}
	for _, c := range []struct {
		name    string
		ask     frontAsk
		want    []string // nil: refused
		from    string   // explain's located_from
		by      string   // a part of explain's located_by (or refused)
		status  int      // the refusal's
		jsonLoc string   // the JSON API's location.from
	}{
		{name: "json, X-Forwarded-For through the trusted proxy", ask: frontAsk{via: "json", from: "127.0.0.1", xff: "198.51.100.7"},
			want: east, from: doh.FromForwarded, by: "X-Forwarded-For 198.51.100.7 (peer 127.0.0.1 is a trusted proxy)", jsonLoc: doh.FromForwarded},
		{name: "json, X-Forwarded-For of another peer", ask: frontAsk{via: "json", from: "127.0.0.2", xff: "198.51.100.7"},
			want: west, from: doh.FromConnection, by: "connection 127.0.0.2 (X-Forwarded-For ignored: peer 127.0.0.2 not in trusted_proxies)", jsonLoc: doh.FromConnection},
		{name: "json, ip= without allow_client_ip", ask: frontAsk{via: "json", from: "127.0.0.1", ip: "198.51.100.7"},
			by: "ip= refused: allow_client_ip is off", status: http.StatusForbidden},
		{name: "doh, X-Forwarded-For through the trusted proxy", ask: frontAsk{via: "doh", from: "127.0.0.1", xff: "10.1.1.1, 198.51.100.9"},
			want: east, from: doh.FromForwarded, by: "X-Forwarded-For 198.51.100.9"},
		{name: "doh, Client Subnet dropped", ask: frontAsk{via: "doh", from: "127.0.0.2", ecs: "198.51.100.0/24"},
			want: west, from: doh.FromConnection, by: "Client Subnet dropped: allow_client_ip is off"},
		{name: "dot, PROXY header of the trusted proxy", ask: frontAsk{via: "dot", from: "127.0.0.1", proxy: "198.51.100.44"},
			want: east, from: doh.FromProxy, by: "PROXY v2 header 198.51.100.44 (peer 127.0.0.1 is a trusted proxy)"},
		{name: "dot, PROXY header of another peer", ask: frontAsk{via: "dot", from: "127.0.0.2", proxy: "198.51.100.44"},
			by: "PROXY header refused: peer 127.0.0.2 not in trusted_proxies"},
		{name: "dot, Client Subnet counts", ask: frontAsk{via: "dot", from: "127.0.0.2", ecs: "198.51.100.0/24"},
			want: east, from: doh.FromConnection, by: "connection 127.0.0.2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := c.ask
			rep, err := r.Explain(context.Background(), control.GSLBExplainRequest{Name: "www.gslb.test", Via: a.via, Peer: a.from,
				ForwardedFor: a.xff, ProxySource: a.proxy, IP: a.ip, ECS: a.ecs})
			if err != nil {
				t.Fatal(err)
			}
			got, loc, status, ferr := a.ask(t, pool, dohAddr, dotAddr)
			if c.want == nil {
				if ferr == nil || status != c.status {
					t.Errorf("the front answered %v (status %d), want it refused with %d", got, status, c.status)
				}
				if rep.Refused == "" || rep.Status != c.status || !strings.Contains(rep.Refused, c.by) || len(rep.Addresses) != 0 {
					t.Errorf("explain: refused %q status %d addresses %v; want refused %d %q", rep.Refused, rep.Status, rep.Addresses, c.status, c.by)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if !slices.Equal(got, c.want) || !slices.Equal(rep.Addresses, got) {
				t.Errorf("the front answered %v, explain %v; want %v", got, rep.Addresses, c.want)
			}
			if rep.Refused != "" || rep.Via != a.via || rep.LocatedFrom != c.from || !strings.Contains(rep.LocatedBy, c.by) {
				t.Errorf("explain: via %s located %s by %q (refused %q); want %s, %q", rep.Via, rep.LocatedFrom, rep.LocatedBy, rep.Refused, c.from, c.by)
			}
			if c.jsonLoc != "" && (loc.From != c.jsonLoc || loc.From != rep.LocatedFrom || loc.Client != rep.Client ||
				loc.Labels["region"] != rep.Location.Labels["region"]) {
				t.Errorf("the JSON API located %+v, explain %s from %s in %v", loc, rep.Client, rep.LocatedFrom, rep.Location.Labels)
			}
		})
	}
}

// TestExplainVia: over udp and tcp the source located is the peer (or
// the client); a front that does not listen is Unavailable; the
// request's combination is checked.
func TestExplainVia(t *testing.T) {
	cfg := explainConfig(t, false)
	r := NewResponder(ResponderOptions{})
	defer r.Stop(context.Background())
	if err := r.Update(cfg, gslb.Evaluate(cfg, states(health.Up, health.Up), time.Now())); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		req  control.GSLBExplainRequest
		by   string
		kind control.Kind
	}{
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Client: "198.51.100.7"}, by: "source address 198.51.100.7 (the udp query's)"},
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Via: "tcp", Peer: "198.51.100.7"}, by: "source address 198.51.100.7 (the tcp query's)"},
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Via: "doh"}, kind: control.Unavailable, by: "no DoH front (gslb.tls doh_listen is empty)"},
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Via: "dot"}, kind: control.Unavailable, by: "no DoT front (gslb.tls dot_listen is empty)"},
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Via: "udp", IP: "192.0.2.1"}, kind: control.Malformed, by: "ip: ip= is a parameter of the JSON API"},
		{req: control.GSLBExplainRequest{Name: "www.gslb.test", Via: "json", Peer: "nope"}, kind: control.Malformed, by: "peer: want an IP address, not nope"},
	} {
		rep, err := r.Explain(ctx, c.req)
		if c.kind != 0 {
			var re *control.Error
			if !errors.As(err, &re) || re.Kind != c.kind || !strings.Contains(re.Message, c.by) {
				t.Errorf("%+v: %v, want kind %d %q", c.req, err, c.kind, c.by)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if rep.LocatedBy != c.by || rep.LocatedFrom != "source" || !slices.Equal(rep.Addresses, []string{"192.0.2.1"}) {
			t.Errorf("%+v: located %s by %q, answer %v; want source, %q, 192.0.2.1", c.req, rep.LocatedFrom, rep.LocatedBy, rep.Addresses, c.by)
		}
	}
}
