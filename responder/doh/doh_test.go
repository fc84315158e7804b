package doh

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestParseProxyV2(t *testing.T) {
	src4, dst := netip.MustParseAddrPort("198.51.100.7:4242"), netip.MustParseAddrPort("192.0.2.53:853")
	h4 := AppendProxyV2(nil, src4, dst)
	got, n, need, err := ParseProxyV2(append(bytes.Clone(h4), 0x16, 3, 1))
	if err != nil || need != 0 || n != len(h4) || got != src4 {
		t.Fatalf("v4: %v %d %d %v", got, n, need, err)
	}
	src6 := netip.MustParseAddrPort("[2001:db8::7]:53")
	h6 := AppendProxyV2(nil, src6, netip.MustParseAddrPort("[2001:db8::53]:853"))
	if got, n, _, err := ParseProxyV2(h6); err != nil || n != 52 || got != src6 {
		t.Fatalf("v6: %v %d %v", got, n, err)
	}
	for i := range len(h4) {
		if _, _, need, err := ParseProxyV2(h4[:i]); err != nil || need == 0 {
			t.Errorf("cut at %d: need %d, err %v", i, need, err)
		}
	}
	local := bytes.Clone(h4)
	local[12] = 0x20 // LOCAL
	if got, n, _, err := ParseProxyV2(local); err != nil || got.IsValid() || n != len(h4) {
		t.Errorf("LOCAL: %v %d %v", got, n, err)
	}
	for name, b := range map[string][]byte{
		"TLS hello":  {0x16, 3, 1, 0, 0x2f, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"version 1":  append(append([]byte{}, h4[:12]...), 0x11, 0x11, 0, 12),
		"command 3":  append(append([]byte{}, h4[:12]...), 0x23, 0x11, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
		"too long":   append(append([]byte{}, h4[:12]...), 0x21, 0x11, 0xff, 0xff),
		"v4 cut":     append(append([]byte{}, h4[:12]...), 0x21, 0x11, 0, 4, 1, 2, 3, 4),
		"PROXY text": []byte("PROXY TCP4 198.51.100.7 192.0.2.53 1 2\r\n"),
	} {
		if _, _, _, err := ParseProxyV2(b); !errors.Is(err, ErrProxyHeader) {
			t.Errorf("%s: %v, want ErrProxyHeader", name, err)
		}
	}
}

// TestTrustLocate: where each front locates its client, and why, for
// the connection's address, the PROXY header, X-Forwarded-For, ip= and
// Client Subnet, under each setting.
func TestTrustLocate(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48")}
	tr := Trust{Proxies: proxies}
	allow := Trust{Proxies: proxies, AllowClientIP: true}
	a := func(s string) netip.Addr {
		if s == "" {
			return netip.Addr{}
		}
		return netip.MustParseAddr(s)
	}
	for _, c := range []struct {
		name    string
		trust   Trust
		proxy   bool
		via     string
		peer    string
		src     string // PROXY header's
		xff     []string
		ip      string
		ecs     bool
		want    string
		from    string
		useECS  bool
		why     string // a part of Why, or of Refused when status is set
		refused bool
		status  int
	}{
		{name: "connection", trust: tr, via: ViaDoH, peer: "192.0.2.1", want: "192.0.2.1", from: FromConnection, why: "connection 192.0.2.1"},
		{name: "xff of an untrusted peer", trust: tr, via: ViaDoH, peer: "192.0.2.1", xff: []string{"203.0.113.5"}, want: "192.0.2.1", from: FromConnection,
			why: "connection 192.0.2.1 (X-Forwarded-For ignored: peer 192.0.2.1 not in trusted_proxies)"},
		{name: "xff of a trusted peer", trust: tr, via: ViaJSON, peer: "10.1.1.1", xff: []string{"203.0.113.5"}, want: "203.0.113.5", from: FromForwarded,
			why: "X-Forwarded-For 203.0.113.5 (peer 10.1.1.1 is a trusted proxy)"},
		{name: "xff past the proxies", trust: tr, via: ViaDoH, peer: "10.1.1.1", xff: []string{"198.51.100.1, 203.0.113.5", "10.2.2.2"}, want: "203.0.113.5", from: FromForwarded},
		{name: "xff all trusted: the first", trust: tr, via: ViaDoH, peer: "10.1.1.1", xff: []string{"10.3.3.3, 10.2.2.2"}, want: "10.3.3.3", from: FromForwarded},
		{name: "xff garbage before", trust: tr, via: ViaDoH, peer: "10.1.1.1", xff: []string{"garbage, 203.0.113.5"}, want: "203.0.113.5", from: FromForwarded},
		{name: "xff garbage last", trust: tr, via: ViaDoH, peer: "10.1.1.1", xff: []string{"203.0.113.5, garbage"}, want: "10.1.1.1", from: FromConnection,
			why: `X-Forwarded-For ignored: its last address "garbage" is not an IP address`},
		{name: "xff garbage midway", trust: tr, via: ViaDoH, peer: "10.1.1.1", xff: []string{"garbage, 10.2.2.2"}, want: "10.2.2.2", from: FromForwarded,
			why: `the walk stopped at "garbage"`},
		{name: "xff ipv6", trust: tr, via: ViaDoH, peer: "2001:db8:1::9", xff: []string{"2001:db8:2::1"}, want: "2001:db8:2::1", from: FromForwarded},
		{name: "xff mapped", trust: tr, via: ViaDoH, peer: "::ffff:10.1.1.1", xff: []string{"::ffff:203.0.113.5"}, want: "203.0.113.5", from: FromForwarded},
		{name: "xff over dot: none", trust: tr, via: ViaDoT, peer: "10.1.1.1", xff: []string{"203.0.113.5"}, want: "10.1.1.1", from: FromConnection},
		{name: "proxy header", trust: tr, proxy: true, via: ViaDoT, peer: "10.1.1.1", src: "198.51.100.4", want: "198.51.100.4", from: FromProxy,
			why: "PROXY v2 header 198.51.100.4 (peer 10.1.1.1 is a trusted proxy)"},
		{name: "proxy header then xff of an untrusted source", trust: tr, proxy: true, via: ViaDoH, peer: "10.1.1.1", src: "198.51.100.4", xff: []string{"203.0.113.5"},
			want: "198.51.100.4", from: FromProxy, why: "X-Forwarded-For ignored: the PROXY header's source 198.51.100.4 not in trusted_proxies"},
		{name: "proxy header then xff of a trusted source", trust: tr, proxy: true, via: ViaDoH, peer: "10.1.1.1", src: "10.9.9.9", xff: []string{"203.0.113.5"},
			want: "203.0.113.5", from: FromForwarded},
		{name: "proxy header, proxy_protocol off", trust: tr, via: ViaDoH, peer: "10.1.1.1", src: "198.51.100.4", refused: true, why: "PROXY header refused: proxy_protocol is off"},
		{name: "proxy header of an untrusted peer", trust: tr, proxy: true, via: ViaDoT, peer: "192.0.2.1", src: "198.51.100.4", refused: true,
			why: "PROXY header refused: peer 192.0.2.1 not in trusted_proxies"},
		{name: "no proxy header from a trusted peer", trust: tr, proxy: true, via: ViaDoH, peer: "10.1.1.1", want: "10.1.1.1", from: FromConnection},
		{name: "ip= not allowed", trust: tr, via: ViaJSON, peer: "192.0.2.1", ip: "192.0.2.77", refused: true, status: 403, why: "ip= refused: allow_client_ip is off"},
		{name: "ip= allowed", trust: allow, via: ViaJSON, peer: "10.1.1.1", xff: []string{"203.0.113.5"}, ip: "192.0.2.77", want: "192.0.2.77", from: FromParam,
			why: "ip= 192.0.2.77 (allow_client_ip is on)"},
		{name: "edns_client_subnet= not allowed", trust: tr, via: ViaJSON, peer: "192.0.2.1", ecs: true, refused: true, status: 403,
			why: "edns_client_subnet= refused: allow_client_ip is off"},
		{name: "edns_client_subnet= allowed", trust: allow, via: ViaJSON, peer: "192.0.2.1", ecs: true, want: "192.0.2.1", from: FromConnection, useECS: true},
		{name: "doh ecs dropped", trust: tr, via: ViaDoH, peer: "192.0.2.1", ecs: true, want: "192.0.2.1", from: FromConnection,
			why: "the message's Client Subnet dropped: allow_client_ip is off"},
		{name: "doh ecs allowed", trust: allow, via: ViaDoH, peer: "192.0.2.1", ecs: true, want: "192.0.2.1", from: FromConnection, useECS: true},
		{name: "dot ecs always", trust: tr, via: ViaDoT, peer: "192.0.2.1", ecs: true, want: "192.0.2.1", from: FromConnection, useECS: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.trust.Locate(c.proxy, Request{Via: c.via, Peer: a(c.peer), ProxySource: a(c.src), ForwardedFor: c.xff, IP: a(c.ip), ECS: c.ecs})
			if c.refused {
				if got.Refused == "" || got.Status != c.status || !strings.Contains(got.Refused, c.why) {
					t.Errorf("got %+v, want refused %d %q", got, c.status, c.why)
				}
				return
			}
			if got.Refused != "" || got.Client != a(c.want) || got.From != c.from || got.ECS != c.useECS || !strings.Contains(got.Why, c.why) {
				t.Errorf("got %+v, want %s from %s, ecs %v, why %q", got, c.want, c.from, c.useECS, c.why)
			}
		})
	}
}

// TestStripECS: the Client Subnet options go, the other options and
// records stay, and the message still unpacks.
func TestStripECS(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.test.", dns.TypeA)
	m.SetEdns0(1232, true)
	opt := m.IsEdns0()
	opt.Option = append(opt.Option,
		&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"},
		&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{192, 0, 2, 0}},
		&dns.EDNS0_PADDING{Padding: make([]byte, 5)})
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := StripECS(bytes.Clone(b))
	var got dns.Msg
	if err := got.Unpack(out); err != nil {
		t.Fatal(err)
	}
	o := got.IsEdns0()
	if o == nil || len(o.Option) != 2 || o.Option[0].Option() != dns.EDNS0COOKIE || o.Option[1].Option() != dns.EDNS0PADDING || !o.Do() || o.UDPSize() != 1232 {
		t.Fatalf("stripped: %v", &got)
	}
	if want := len(b) - 11; len(out) != want { // the option: code, length, family, source, scope, 3 octets
		t.Errorf("%d octets, want %d", len(out), want)
	}
	// Without ECS, unchanged; a message cut short, unchanged.
	if again := StripECS(bytes.Clone(out)); !bytes.Equal(again, out) {
		t.Error("a message without ECS changed")
	}
	if cut := StripECS(bytes.Clone(b[:len(b)-3])); !bytes.Equal(cut, b[:len(b)-3]) {
		t.Error("a message cut short changed")
	}
}

func TestMinTTL(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.test.", dns.TypeA)
	m.Response = true
	if _, ok := MinTTL(must(m.Pack())); ok {
		t.Error("a reply without records has a TTL")
	}
	for _, s := range []string{"www.example.test. 300 IN A 192.0.2.1", "www.example.test. 30 IN A 192.0.2.2"} {
		rr, _ := dns.NewRR(s)
		m.Answer = append(m.Answer, rr)
	}
	soa, _ := dns.NewRR("example.test. 20 IN SOA ns. host. 1 2 3 4 5")
	m.Ns = []dns.RR{soa}
	m.SetEdns0(1232, false)
	m.Extra[0].Header().Ttl = 1 // the OPT record's TTL field (flags) is no TTL
	if ttl, ok := MinTTL(must(m.Pack())); !ok || ttl != 20 {
		t.Errorf("MinTTL = %d %v, want 20", ttl, ok)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestSignVerify(t *testing.T) {
	secret := []byte("0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	q := Sign(secret, "/resolve", "name=app.example.test&type=A", now.Add(time.Minute))
	if err := VerifySigned(secret, "/resolve", q, now); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for name, c := range map[string]struct {
		path, q string
		at      time.Time
		want    error
	}{
		"expired":        {"/resolve", q, now.Add(2 * time.Minute), ErrExpired},
		"other secret":   {"/resolve", Sign([]byte("fedcba9876543210"), "/resolve", "name=app.example.test&type=A", now.Add(time.Minute)), now, ErrBadSig},
		"name changed":   {"/resolve", strings.Replace(q, "app.", "evil.", 1), now, ErrBadSig},
		"exp moved":      {"/resolve", strings.Replace(q, "exp=18", "exp=19", 1), now, ErrBadSig},
		"other path":     {"/other", q, now, ErrBadSig},
		"unsigned":       {"/resolve", "name=app.example.test", now, ErrUnsigned},
		"param appended": {"/resolve", q + "&ip=192.0.2.1", now, ErrBadSig},
	} {
		if err := VerifySigned(secret, c.path, c.q, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
