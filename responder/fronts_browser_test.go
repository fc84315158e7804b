package responder

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/gslb"
	"lbdns/testkit/browser"
)

// countingLoopback is loopback counting the A questions it answers for
// name.
type countingLoopback struct {
	name string
	n    atomic.Int64
}

func (c *countingLoopback) Answer(q gslb.Query) gslb.Response {
	if q.Type == dns.TypeA && q.Name == c.name {
		c.n.Add(1)
	}
	return loopback{}.Answer(q)
}

// TestFrontsChromium: Chromium in secure DNS mode (DNS over HTTPS only,
// no fallback to the system's resolver) with a DoH template pointing at
// the front resolves a name through it (GET, application/dns-message)
// and loads the page at the address it got.
func TestFrontsChromium(t *testing.T) {
	browser.Require(t)
	a := &countingLoopback{name: "app.gslb.test."}
	f := startFronts(t, a, frontsCfg(nil))
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body><p id=reached>reached "+r.Host+"</p></body></html>")
	}))
	defer web.Close()
	_, webPort := hostPort(web.Listener.Addr().String())
	// Chromium keeps its secure DNS settings in the profile's Local
	// State; a template with {?dns} is asked with GET.
	state, err := json.Marshal(map[string]any{"dns_over_https": map[string]string{
		"mode": "secure", "templates": "https://" + f.doh + "/dns-query{?dns}"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := browser.DumpDOMProfile(ctx, "http://app.gslb.test:"+webPort+"/", browser.Profile{
		LocalState: state,
		// The front's certificate is the test's own CA's.
		Flags: []string{"--ignore-certificate-errors"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "reached app.gslb.test:" + webPort; !strings.Contains(dom, want) {
		t.Fatalf("Chromium did not load the page through the front's answer (want %q):\n%s", want, dom)
	}
	if a.n.Load() == 0 {
		t.Fatal("the page loaded, but the front was never asked for app.gslb.test A")
	}
	if n := testutil.ToFloat64(f.srv.Metrics.fronts.Requests("doh", http.StatusOK)); n == 0 {
		t.Error("no DoH request answered 200 counted")
	}
}
