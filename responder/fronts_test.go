package responder

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/responder/doh"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and
// localhost, named cn, and its key to dir/cert.pem and dir/key.pem, and
// returns their paths and a pool that trusts it.
func writeCert(t testing.TB, dir, cn string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(mrand.Int64N(1 << 62)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	return certFile, keyFile, pool
}

// fronted is a started server with its fronts.
type fronted struct {
	srv             *Server
	udp, doh, dot   string // addresses
	pool            *x509.CertPool
	certFile, keyFI string
	reg             *prometheus.Registry
}

// frontsCfg is the [gslb.tls] of the tests (allow_client_ip on, small
// timeouts), changed by mod.
func frontsCfg(mod func(*configs.GSLBTLS)) configs.GSLBTLS {
	t := configs.GSLBTLS{
		DoHAddrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, DoTAddrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")},
		DoHPath: "/dns-query", JSONPath: "/resolve", AllowClientIP: true,
		MaxConnections: 64, MaxPerSource: 64, MaxMessageSize: 65535, MaxStreams: 100, MaxBatch: 16,
	}
	t.HandshakeTimeout.Duration, t.IdleTimeout.Duration, t.RequestTimeout.Duration = 2*time.Second, 10*time.Second, 5*time.Second
	t.CertCheckInterval.Duration = time.Second
	if mod != nil {
		mod(&t)
	}
	return t
}

// startFronts starts a Server on 127.0.0.1 answering from a with UDP,
// TCP, DoH (and the JSON API) and DoT, [gslb.tls] as tc says, stopped
// when the test ends.
func startFronts(t *testing.T, a gslb.Answerer, tc configs.GSLBTLS) *fronted {
	t.Helper()
	certFile, keyFile, pool := writeCert(t, t.TempDir(), "gslb-a")
	certs, err := doh.LoadCerts(certFile, keyFile, 0, nil) // looked at on every handshake
	if err != nil {
		t.Fatal(err)
	}
	tc.CertFile, tc.KeyFile = certFile, keyFile
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	certs.Reloaded = m.frontSeries().CertReloaded
	srv := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, Metrics: m,
		Fronts: FrontsOf(configs.GSLBServer{TCPMaxQueries: 1000, TCPReservedFDs: 1024}, tc, certs)}
	srv.Swap(a)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	f := &fronted{srv: srv, udp: srv.Addrs()[0].String(), pool: pool, certFile: certFile, keyFI: keyFile, reg: reg}
	dohA, dotA := srv.FrontAddrs()
	if len(dohA) > 0 {
		f.doh = dohA[0].String()
	}
	if len(dotA) > 0 {
		f.dot = dotA[0].String()
	}
	return f
}

// httpClient is a client of f's DoH: HTTP/2 when h2, else HTTP/1.1.
func (f *fronted) httpClient(t *testing.T, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.pool}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// dohPost sends the DNS message q over DoH (POST) and returns the reply,
// the response and its protocol.
func dohPost(t *testing.T, c *http.Client, addr string, q []byte) ([]byte, *http.Response) {
	t.Helper()
	resp, err := c.Post("https://"+addr+"/dns-query", doh.MediaDNSMessage, bytes.NewReader(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, resp
}

// dohGet sends q over DoH (GET).
func dohGet(t *testing.T, c *http.Client, addr string, q []byte) ([]byte, *http.Response) {
	t.Helper()
	resp, err := c.Get("https://" + addr + "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, resp
}

// udpWire sends q over UDP to addr and returns the reply's bytes.
func udpWire(t *testing.T, addr string, q []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// dotConn opens a DoT connection to f.
func (f *fronted) dotConn(t *testing.T) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.dot, &tls.Config{RootCAs: f.pool, NextProtos: []string{"dot"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// streamExchange writes q with its length prefix to c and reads one
// framed reply.
func streamExchange(t *testing.T, c net.Conn, q []byte) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)); err != nil {
		t.Fatal(err)
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, int(n[0])<<8|int(n[1]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonGet asks the JSON API with the query string q.
func jsonGet(t *testing.T, c *http.Client, addr, q string) (int, []byte) {
	t.Helper()
	resp, err := c.Get("https://" + addr + "/resolve?" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestFrontsSameAnswers: for a few hundred random queries over a real
// snapshot (names of the deterministic algorithms, static records,
// whoami, NXDOMAIN, REFUSED, with and without Client Subnet options of
// every kind), DoH over HTTP/2 (POST) and HTTP/1.1 (GET), DoT and TCP
// give the very bytes UDP gives, and the JSON API the same records and
// code.
func TestFrontsSameAnswers(t *testing.T) {
	cfg, err := configs.Parse([]byte(algorithmsDoc()), "doh.toml")
	if err != nil {
		t.Fatal(err)
	}
	f := startFronts(t, snapshotOf(t, cfg, "down"), frontsCfg(nil))
	h2, h1 := f.httpClient(t, true), f.httpClient(t, false)
	dot := f.dotConn(t)
	tcp, err := net.Dial("tcp", f.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	// Names whose answers do not rotate from one query to the next
	// (the hash and rendezvous algorithms, the static records, the
	// apex, ...), so that a query asked twice is answered alike.
	names := []string{"hash", "hash-ecs", "rendezvous", "rendezvous-ecs", "down", "www", "v6", "alias", "txt", "whoami", "nx", ""}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSOA}
	rng := mrand.New(mrand.NewPCG(35, 8484))
	protos := map[string]int{}
	const n = 300
	for i := range n {
		name := names[rng.IntN(len(names))]
		qname := "bench.test."
		if name != "" {
			qname = name + ".bench.test."
		}
		if rng.IntN(15) == 0 {
			qname = "example.com."
		}
		qt := types[rng.IntN(len(types))]
		m := query(qname, qt, 4096)
		m.Id = uint16(i)
		var ecsData []byte
		if rng.IntN(3) > 0 {
			ecsData = randomECS(rng)
			withECS(m, ecsData)
		}
		q, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		clone := func() []byte { return bytes.Clone(q) }
		want := udpWire(t, f.udp, clone())
		var resp *http.Response
		got := map[string][]byte{}
		got["tcp"] = streamExchange(t, tcp, clone())
		got["dot"] = streamExchange(t, dot, clone())
		got["doh-h2-post"], resp = dohPost(t, h2, f.doh, clone())
		protos[resp.Proto]++
		got["doh-h1-get"], resp = dohGet(t, h1, f.doh, clone())
		protos[resp.Proto]++
		for k, b := range got {
			if !bytes.Equal(b, want) {
				var w, g dns.Msg
				w.Unpack(want)
				g.Unpack(b)
				t.Fatalf("query %d (%s %s ecs %x) over %s:\n%v\nUDP:\n%v", i, qname, dns.TypeToString[qt], ecsData, k, &g, &w)
			}
		}
		// The JSON API: the same code and records (ECS as a prefix,
		// when it is one the API can say).
		var wm dns.Msg
		if err := wm.Unpack(want); err != nil {
			t.Fatal(err)
		}
		v := url.Values{"name": {qname}, "type": {dns.TypeToString[qt]}}
		if ecsData != nil {
			p, ok := ecsPrefix(ecsData)
			if !ok || wm.Rcode == dns.RcodeFormatError {
				continue // a malformed option: only the wire can carry it
			}
			v.Set("edns_client_subnet", p.String())
		}
		code, body := jsonGet(t, h2, f.doh, v.Encode())
		if code != http.StatusOK {
			t.Fatalf("json %s: %d %s", v.Encode(), code, body)
		}
		var jr doh.JSONReply
		if err := json.Unmarshal(body, &jr); err != nil {
			t.Fatalf("json %s: %v\n%s", v.Encode(), err, body)
		}
		if jr.Status != wm.Rcode || len(jr.Answer) != len(wm.Answer) || len(jr.Authority) != len(wm.Ns) {
			t.Fatalf("json %s: %s\nUDP:\n%v", v.Encode(), body, &wm)
		}
		for j, rr := range wm.Answer {
			if d := strings.TrimPrefix(rr.String(), rr.Header().String()); jr.Answer[j].Data != d || jr.Answer[j].TTL != rr.Header().Ttl {
				t.Fatalf("json %s answer %d: %+v, UDP %v", v.Encode(), j, jr.Answer[j], rr)
			}
		}
	}
	if protos["HTTP/2.0"] != n || protos["HTTP/1.1"] != n {
		t.Errorf("protocols used: %v, want HTTP/2.0 and HTTP/1.1 %d times each", protos, n)
	}
}

// ecsPrefix is the prefix of a Client Subnet option's data, when it is
// well formed (FAMILY 1 or 2, no bits beyond SOURCE); a mapped IPv6
// prefix is not one the JSON API can tell from IPv4.
func ecsPrefix(d []byte) (netip.Prefix, bool) {
	e, ok := parseECS(d)
	if !ok || e.addr.Is4In6() {
		return netip.Prefix{}, false
	}
	return e.prefix, true
}

// TestFrontsCountedAsQueries: the fronts' queries are counted in the
// responder's series (per transport where they have their own).
func TestFrontsCountedAsQueries(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(nil))
	q, _ := query("www.example.test.", dns.TypeA, 1232).Pack()
	c := f.httpClient(t, true)
	for range 3 {
		dohPost(t, c, f.doh, bytes.Clone(q))
	}
	streamExchange(t, f.dotConn(t), bytes.Clone(q))
	jsonGet(t, c, f.doh, "name=www.example.test")
	m := f.srv.Metrics
	if got := testutil.ToFloat64(m.queries.WithLabelValues("A", "NOERROR")); got != 5 {
		t.Errorf("lbdns_gslb_queries_total{A,NOERROR} = %v, want 5 (3 DoH, 1 DoT, 1 JSON)", got)
	}
	if got := testutil.ToFloat64(m.dot.queries); got != 1 {
		t.Errorf("lbdns_gslb_dot_queries_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.fronts.Requests("doh", 200)); got != 3 {
		t.Errorf("doh requests 200 = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.fronts.Requests("json", 200)); got != 1 {
		t.Errorf("json requests 200 = %v, want 1", got)
	}
}

// TestDoHBadRequests: each bad request gets the RFC's status code and a
// good one still works on the same connection.
func TestDoHBadRequests(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(func(c *configs.GSLBTLS) { c.MaxMessageSize = 1024 }))
	c := f.httpClient(t, true)
	good, _ := query("www.example.test.", dns.TypeA, 1232).Pack()
	resp := query("www.example.test.", dns.TypeA, 1232)
	resp.Response = true
	respWire, _ := resp.Pack()
	u := "https://" + f.doh
	for _, tc := range []struct {
		name, method, path, ctype string
		body                      []byte
		want                      int
	}{
		{"garbage body", "POST", "/dns-query", doh.MediaDNSMessage, []byte("this is not DNS at all, not even close to a header"), http.StatusBadRequest},
		{"short body", "POST", "/dns-query", doh.MediaDNSMessage, []byte{1, 2, 3}, http.StatusBadRequest},
		{"empty body", "POST", "/dns-query", doh.MediaDNSMessage, nil, http.StatusBadRequest},
		{"a response", "POST", "/dns-query", doh.MediaDNSMessage, respWire, http.StatusBadRequest},
		{"oversized body", "POST", "/dns-query", doh.MediaDNSMessage, make([]byte, 70000), http.StatusRequestEntityTooLarge},
		{"oversized GET", "GET", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(make([]byte, 2000)), "", nil, http.StatusRequestEntityTooLarge},
		{"wrong content type", "POST", "/dns-query", "application/json", good, http.StatusUnsupportedMediaType},
		{"no content type", "POST", "/dns-query", "", good, http.StatusUnsupportedMediaType},
		{"GET without dns", "GET", "/dns-query", "", nil, http.StatusBadRequest},
		{"GET with empty dns", "GET", "/dns-query?dns=", "", nil, http.StatusBadRequest},
		{"GET not base64url", "GET", "/dns-query?dns=***", "", nil, http.StatusBadRequest},
		{"PUT", "PUT", "/dns-query", doh.MediaDNSMessage, good, http.StatusMethodNotAllowed},
		{"DELETE json", "DELETE", "/resolve?name=www.example.test", "", nil, http.StatusMethodNotAllowed},
		{"other path", "GET", "/", "", nil, http.StatusNotFound},
		{"json without name", "GET", "/resolve", "", nil, http.StatusBadRequest},
		{"json bad type", "GET", "/resolve?name=www.example.test&type=NOPE", "", nil, http.StatusBadRequest},
		{"json batch too big", "GET", "/resolve?name=" + strings.Repeat("a.example.test,", 9) + "&type=A,AAAA", "", nil, http.StatusBadRequest},
		{"good GET, padded", "GET", "/dns-query?dns=" + base64.URLEncoding.EncodeToString(good), "", nil, http.StatusOK},
		{"good POST", "POST", "/dns-query", doh.MediaDNSMessage, good, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, u+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if tc.want == http.StatusOK {
				if ct := resp.Header.Get("Content-Type"); ct != doh.MediaDNSMessage {
					t.Errorf("Content-Type %q", ct)
				}
				if cc := resp.Header.Get("Cache-Control"); cc != "max-age=30" {
					t.Errorf("Cache-Control %q, want max-age=30 (the answer's TTL)", cc)
				}
				var m dns.Msg
				if err := m.Unpack(body); err != nil || len(m.Answer) != 1 {
					t.Errorf("reply %v (%v)", &m, err)
				}
			}
		})
	}
}

// TestDoHCacheControlNegative: a negative answer may be kept for its
// SOA's TTL, a reply without records not at all.
func TestDoHCacheControlNegative(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(nil))
	c := f.httpClient(t, true)
	for _, tc := range []struct {
		name string
		want string
	}{{"nope.example.test.", "max-age=300"}, {"example.com.", "max-age=0"}} {
		q, _ := query(tc.name, dns.TypeA, 1232).Pack()
		_, resp := dohPost(t, c, f.doh, q)
		if cc := resp.Header.Get("Cache-Control"); cc != tc.want {
			t.Errorf("%s: Cache-Control %q, want %q", tc.name, cc, tc.want)
		}
	}
}

// TestFrontsClientLocation: the client is the connection's address;
// Client Subnet inside a DoH message counts only with allow_client_ip;
// X-Forwarded-For and the PROXY v2 header only from trusted proxies;
// ip= only when allowed.
func TestFrontsClientLocation(t *testing.T) {
	ecs := func() []byte {
		q, _ := withECS(query("geo.example.test.", dns.TypeA, 1232), []byte{0, 1, 24, 0, 198, 51, 100}).Pack()
		return q
	}
	t.Run("not allowed, not trusted", func(t *testing.T) {
		fk := &fake{Scope: 16}
		f := startFronts(t, fk, frontsCfg(func(c *configs.GSLBTLS) { c.AllowClientIP = false }))
		c := f.httpClient(t, true)
		reply, _ := dohPost(t, c, f.doh, ecs())
		var m dns.Msg
		if err := m.Unpack(reply); err != nil {
			t.Fatal(err)
		}
		if q := fk.lastQuery(); q.ECS.IsValid() || q.Source != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("answered for %+v, want the connection's address and no ECS", q)
		}
		if ecsOf(&m) != nil {
			t.Errorf("reply echoes an ECS option that was dropped: %v", &m)
		}
		req, _ := http.NewRequest("POST", "https://"+f.doh+"/dns-query", bytes.NewReader(ecs()))
		req.Header.Set("Content-Type", doh.MediaDNSMessage)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if q := fk.lastQuery(); q.Source != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("X-Forwarded-For of an untrusted peer believed: %v", q.Source)
		}
		if code, body := jsonGet(t, c, f.doh, "name=www.example.test&ip=203.0.113.9"); code != http.StatusForbidden {
			t.Errorf("ip= not allowed: %d %s, want 403", code, body)
		}
	})
	t.Run("allowed and trusted", func(t *testing.T) {
		fk := &fake{Scope: 16}
		f := startFronts(t, fk, frontsCfg(func(c *configs.GSLBTLS) {
			c.Proxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			c.ProxyProtocol = true
		}))
		c := f.httpClient(t, true)
		reply, _ := dohPost(t, c, f.doh, ecs())
		var m dns.Msg
		m.Unpack(reply)
		if q := fk.lastQuery(); q.ECS != netip.MustParsePrefix("198.51.100.0/24") {
			t.Errorf("ECS of an allowed DoH message not used: %+v", q)
		}
		if e := ecsOf(&m); e == nil || e.SourceScope != 16 {
			t.Errorf("reply's ECS %v, want scope 16", e)
		}
		req, _ := http.NewRequest("GET", "https://"+f.doh+"/dns-query?dns="+base64.RawURLEncoding.EncodeToString(func() []byte { q, _ := query("www.example.test.", dns.TypeA, 0).Pack(); return q }()), nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9, 127.0.0.5")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if q := fk.lastQuery(); q.Source != netip.MustParseAddr("203.0.113.9") {
			t.Errorf("X-Forwarded-For of a trusted proxy: source %v, want 203.0.113.9", q.Source)
		}
		code, body := jsonGet(t, c, f.doh, "name=www.example.test&ip=192.0.2.77")
		var jr doh.JSONReply
		json.Unmarshal(body, &jr)
		if q := fk.lastQuery(); code != 200 || q.Source != netip.MustParseAddr("192.0.2.77") || jr.Location.From != "ip" || jr.Location.Client != "192.0.2.77" {
			t.Errorf("ip=: %d %s, source %v", code, body, q.Source)
		}
		// PROXY v2 on DoT: the header's source is the client.
		raw, err := net.Dial("tcp", f.dot)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.Write(doh.AppendProxyV2(nil, netip.MustParseAddrPort("198.51.100.44:5353"), netip.MustParseAddrPort("127.0.0.1:853")))
		tc := tls.Client(raw, &tls.Config{RootCAs: f.pool, ServerName: "127.0.0.1"})
		q, _ := query("www.example.test.", dns.TypeA, 0).Pack()
		streamExchange(t, tc, q)
		if q := fk.lastQuery(); q.Source != netip.MustParseAddr("198.51.100.44") {
			t.Errorf("DoT behind PROXY v2: source %v, want 198.51.100.44", q.Source)
		}
		// And on DoH.
		raw2, err := net.Dial("tcp", f.doh)
		if err != nil {
			t.Fatal(err)
		}
		raw2.Write(doh.AppendProxyV2(nil, netip.MustParseAddrPort("[2001:db8::44]:5353"), netip.MustParseAddrPort("127.0.0.1:443")))
		tr := &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			tc := tls.Client(raw2, &tls.Config{RootCAs: f.pool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
			return tc, tc.HandshakeContext(ctx)
		}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		dohPost(t, &http.Client{Transport: tr}, f.doh, q)
		if q := fk.lastQuery(); q.Source != netip.MustParseAddr("2001:db8::44") {
			t.Errorf("DoH behind PROXY v2: source %v, want 2001:db8::44", q.Source)
		}
	})
}

// TestFrontsSlowHandshake: a client that connects and sends nothing (or
// half a handshake) is closed after the handshake timeout, on DoH and
// DoT, and counted; the others are served meanwhile.
func TestFrontsSlowHandshake(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(func(c *configs.GSLBTLS) { c.HandshakeTimeout.Duration = 300 * time.Millisecond }))
	for _, addr := range []string{f.doh, f.dot} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0x16, 3, 1}) // the start of a record, never finished
		began := time.Now()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c)
		c.Close()
		if took := time.Since(began); err != nil || took > 5*time.Second {
			t.Errorf("%s: a stalled handshake closed after %v (%v), want about 300ms", addr, took, err)
		}
	}
	q, _ := query("www.example.test.", dns.TypeA, 0).Pack()
	dohPost(t, f.httpClient(t, true), f.doh, q)
	m := f.srv.Metrics
	if got := testutil.ToFloat64(m.dot.closed.WithLabelValues(closedHandshake)); got != 1 {
		t.Errorf("dot closed{handshake} = %v, want 1", got)
	}
}

// TestFrontsIdleCaps: idle connections beyond a front's caps are closed
// at once and counted; answers go on over UDP and over the connections
// kept.
func TestFrontsIdleCaps(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(func(c *configs.GSLBTLS) {
		c.MaxConnections, c.MaxPerSource = 40, 10
		c.HandshakeTimeout.Duration = time.Minute // idle, not slow: the caps close them, not the timeout
	}))
	q, _ := query("www.example.test.", dns.TypeA, 0).Pack()
	h2 := f.httpClient(t, true)
	dohPost(t, h2, f.doh, bytes.Clone(q)) // one connection kept open
	var all []net.Conn
	defer func() {
		for _, c := range all {
			c.Close()
		}
	}()
	dial := func(addr, from string, n int) []net.Conn {
		var out []net.Conn
		for range n {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		all = append(all, out...)
		return out
	}
	// refused tells, for each of cs, whether the server closed it at
	// once (a read ends before the deadline with EOF or a reset).
	refused := func(cs []net.Conn) []bool {
		out := make([]bool, len(cs))
		done := make(chan struct{})
		for i, c := range cs {
			go func() {
				defer func() { done <- struct{}{} }()
				c.SetReadDeadline(time.Now().Add(time.Second))
				_, err := c.Read(make([]byte, 1))
				ne, ok := err.(net.Error)
				out[i] = err != nil && !(ok && ne.Timeout())
			}()
		}
		for range cs {
			<-done
		}
		return out
	}
	count := func(b []bool) (n int) {
		for _, x := range b {
			if x {
				n++
			}
		}
		return n
	}
	// 127.0.0.1 has one DoH connection: of 10 more, the last is refused
	// (per source); from 127.0.0.2..4, 10 each are kept: 40 in all, and
	// one more from 127.0.0.5 is refused (the limit).
	if got := refused(dial(f.doh, "127.0.0.1", 10)); count(got) != 1 || !got[9] {
		t.Fatalf("DoH from 127.0.0.1, refused: %v, want the last only", got)
	}
	for _, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		if got := refused(dial(f.doh, from, 10)); count(got) != 0 {
			t.Fatalf("DoH from %s below the caps, refused: %v", from, got)
		}
	}
	if got := refused(dial(f.doh, "127.0.0.5", 1)); !got[0] {
		t.Fatal("a DoH connection beyond max_connections was kept")
	}
	fr := f.srv.Metrics.fronts
	if got := testutil.ToFloat64(fr.Refused("per_source")); got != 1 {
		t.Errorf("refused{per_source} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(fr.Refused("limit")); got != 1 {
		t.Errorf("refused{limit} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(fr.Open()); got != 40 {
		t.Errorf("open DoH connections %v, want 40", got)
	}
	// The connection kept answers; so does UDP.
	if reply, resp := dohPost(t, h2, f.doh, bytes.Clone(q)); resp.StatusCode != 200 || len(reply) == 0 {
		t.Errorf("the kept DoH connection: %d", resp.StatusCode)
	}
	if len(udpWire(t, f.udp, bytes.Clone(q))) == 0 {
		t.Error("no UDP answer")
	}
	// DoT: the 11th from one client is refused.
	if got := refused(dial(f.dot, "127.0.0.6", 11)); count(got) != 1 || !got[10] {
		t.Fatalf("DoT from 127.0.0.6, refused: %v, want the last only", got)
	}
	if got := testutil.ToFloat64(f.srv.Metrics.dot.refused.WithLabelValues(refusedPerSource)); got != 1 {
		t.Errorf("dot refused{per_source} = %v, want 1", got)
	}
}

// TestFrontsCertificateReload: a new pair written over the files serves
// the next handshake without a restart; a bad one is counted and the
// last good pair keeps serving.
func TestFrontsCertificateReload(t *testing.T) {
	f := startFronts(t, &fake{}, frontsCfg(nil))
	peer := func() string {
		c, err := tls.Dial("tcp", f.dot, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := peer(); cn != "gslb-a" {
		t.Fatalf("serving %q", cn)
	}
	dir := t.TempDir()
	cf, kf, _ := writeCert(t, dir, "gslb-b")
	for _, p := range [][2]string{{cf, f.certFile}, {kf, f.keyFI}} {
		b, _ := os.ReadFile(p[0])
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cn := peer(); cn != "gslb-b" {
		t.Fatalf("after the files changed, serving %q, want gslb-b", cn)
	}
	if err := os.WriteFile(f.keyFI, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cn := peer(); cn != "gslb-b" {
		t.Fatalf("after a bad key, serving %q, want gslb-b still", cn)
	}
	fr := f.srv.Metrics.fronts
	if ok, bad := testutil.ToFloat64(fr.Reloads("ok")), testutil.ToFloat64(fr.Reloads("error")); ok != 1 || bad < 1 {
		t.Errorf("reloads ok %v error %v, want 1 and at least 1", ok, bad)
	}
}
