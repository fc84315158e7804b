package nginx

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestStartHealthToggle: nginx on loopback serves / and /down, and
// /health follows SetHealthy.
func TestStartHealthToggle(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := netip.MustParseAddrPort(l.Addr().String()).Port()
	l.Close()
	s := Start(t, Options{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, HTTP: port})
	if s.HTTPS.IsValid() || s.Expired.IsValid() {
		t.Errorf("TLS addresses %v %v without TLS", s.HTTPS, s.Expired)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.HTTP.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	for _, tt := range []struct {
		path    string
		healthy bool
		code    int
		body    string
	}{
		{"/", true, 200, "nginx ok"},
		{"/down", true, 503, "down for maintenance"},
		{"/health", true, 200, "healthy"},
		{"/health", false, 503, "maintenance"},
		{"/health", true, 200, "healthy"},
	} {
		s.SetHealthy(t, tt.healthy)
		if code, body := get(tt.path); code != tt.code || body != tt.body {
			t.Errorf("GET %s (healthy %v) = %d %q, want %d %q", tt.path, tt.healthy, code, body, tt.code, tt.body)
		}
	}
}
