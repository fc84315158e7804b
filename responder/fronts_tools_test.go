package responder

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/gslb"
	"lbdns/responder/doh"
)

// needTool returns the path of a client tool, skipping the test when it
// is not installed (failing it when LBDNS_REQUIRE_VENDORS=1:
// scripts/install-test-deps.sh installs curl, bind9-dnsutils and
// knot-dnsutils).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" || os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (scripts/install-test-deps.sh)", name)
		}
		t.Skipf("%s not installed (scripts/install-test-deps.sh)", name)
	}
	return p
}

// runTool runs a client tool and returns its output (stdout and
// stderr), failing the test when it fails.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	path := needTool(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loopback answers A 127.0.0.1 (TTL 60) for every name: a name curl can
// resolve over DoH and then connect to.
type loopback struct{}

func (loopback) Answer(q gslb.Query) gslb.Response {
	if q.Type != dns.TypeA {
		return gslb.Response{}
	}
	return gslb.Response{Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(127, 0, 0, 1)}}}
}

// hostPort splits a loopback address for dig and kdig.
func hostPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}

// TestFrontsDigKdig: BIND's dig and Knot's kdig ask over DoH (POST and
// GET, HTTP/2) and DoT and get the answer UDP gives.
func TestFrontsDigKdig(t *testing.T) {
	f := startFronts(t, &fake{Scope: 16}, frontsCfg(nil))
	dh, dp := hostPort(f.doh)
	th, tp := hostPort(f.dot)
	for _, c := range []struct {
		tool string
		args []string
		want []string
	}{
		{"kdig", []string{"@" + dh, "-p", dp, "+https", "www.example.test", "A"}, []string{"192.0.2.1", "status: NOERROR"}},
		{"kdig", []string{"@" + dh, "-p", dp, "+https", "+https-get", "www.example.test", "AAAA"}, []string{"2001:db8::1"}},
		{"kdig", []string{"@" + dh, "-p", dp, "+https", "+subnet=192.0.2.0/24", "geo.example.test", "A"}, []string{"192.0.2.2", "CLIENT-SUBNET: 192.0.2.0/24/16"}},
		{"kdig", []string{"@" + th, "-p", tp, "+tls", "www.example.test", "A"}, []string{"192.0.2.1", "TLS"}},
		{"kdig", []string{"@" + th, "-p", tp, "+tls", "nope.example.test", "A"}, []string{"status: NXDOMAIN"}},
		{"dig", []string{"@" + dh, "-p", dp, "+https", "+tries=1", "+time=5", "www.example.test", "A"}, []string{"192.0.2.1", "status: NOERROR", "(HTTPS)"}},
		{"dig", []string{"@" + dh, "-p", dp, "+https-get", "+tries=1", "+time=5", "www.example.test", "A"}, []string{"192.0.2.1", "(HTTPS-GET)"}},
		{"dig", []string{"@" + th, "-p", tp, "+tls", "+tries=1", "+time=5", "www.example.test", "A"}, []string{"192.0.2.1", "(TLS)"}},
		{"dig", []string{"@" + th, "-p", tp, "+tls", "+tries=1", "+time=5", "+subnet=198.51.100.0/24", "geo.example.test", "A"}, []string{"CLIENT-SUBNET: 198.51.100.0/24/16"}},
	} {
		t.Run(c.tool+" "+strings.Join(c.args[3:], " "), func(t *testing.T) {
			out := runTool(t, c.tool, c.args...)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestFrontsCurl: curl resolves a name through DoH (--doh-url) and
// fetches a page from the address it got; it POSTs and GETs
// application/dns-message over HTTP/2; it reads the JSON API.
func TestFrontsCurl(t *testing.T) {
	needTool(t, "curl")
	f := startFronts(t, loopback{}, frontsCfg(nil))
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached "+r.Host) }))
	defer web.Close()
	_, webPort := hostPort(web.Listener.Addr().String())
	base := "https://" + f.doh
	out := runTool(t, "curl", "-sS", "--max-time", "10", "--doh-url", base+"/dns-query", "--doh-insecure", "http://app.gslb.test:"+webPort+"/")
	if want := "reached app.gslb.test:" + webPort; out != want {
		t.Errorf("curl --doh-url: %q, want %q", out, want)
	}

	dir := t.TempDir()
	q, _ := query("app.gslb.test.", dns.TypeA, 0).Pack()
	qf := filepath.Join(dir, "q.bin")
	os.WriteFile(qf, q, 0o600)
	for _, args := range [][]string{
		{"--http2", "-H", "Content-Type: " + doh.MediaDNSMessage, "--data-binary", "@" + qf, base + "/dns-query"},
		{"--http2", base + "/dns-query?dns=" + strings.TrimRight(encodeB64(q), "=")},
		{"--http1.1", "-H", "Content-Type: " + doh.MediaDNSMessage, "--data-binary", "@" + qf, base + "/dns-query"},
	} {
		rf := filepath.Join(dir, "r.bin")
		hdr := runTool(t, "curl", append([]string{"-sS", "--max-time", "10", "-k", "-D", "-", "-o", rf}, args...)...)
		b, _ := os.ReadFile(rf)
		var m dns.Msg
		if err := m.Unpack(b); err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			t.Errorf("curl %v: reply %v (%v)", args, &m, err)
		}
		lower := strings.ToLower(hdr)
		if !strings.Contains(lower, "content-type: application/dns-message") || !strings.Contains(lower, "cache-control: max-age=60") {
			t.Errorf("curl %v: headers\n%s", args, hdr)
		}
		if args[0] == "--http2" && !strings.HasPrefix(hdr, "HTTP/2 200") {
			t.Errorf("curl %v: not HTTP/2:\n%s", args, hdr)
		}
	}
	body := runTool(t, "curl", "-sS", "--max-time", "10", "-k", base+"/resolve?name=app.gslb.test,www.gslb.test&type=A")
	var batch []doh.JSONReply
	if err := json.Unmarshal([]byte(body), &batch); err != nil || len(batch) != 2 {
		t.Fatalf("curl json batch: %v\n%s", err, body)
	}
	for i, r := range batch {
		if r.Status != 0 || len(r.Answer) != 1 || r.Answer[0].Data != "127.0.0.1" || r.Answer[0].TTL != 60 || r.Location.Client != "127.0.0.1" || r.Location.From != "connection" {
			t.Errorf("batch[%d] = %+v", i, r)
		}
	}
	if batch[0].Question[0].Name != "app.gslb.test." || batch[1].Question[0].Name != "www.gslb.test." {
		t.Errorf("batch order: %+v", batch)
	}

}

// encodeB64 is base64url with padding (curl's GET is sent without it).
func encodeB64(b []byte) string { return base64URL.EncodeToString(b) }

var base64URL = base64.URLEncoding
