package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// TestMalformedRequests sends raw HTTP requests over the control socket:
// each malformed one gets a 4xx whose message names the problem, and
// nothing changes (no overrides file, the same status and table).
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(3))
	w.startReady()
	before, err := os.ReadFile(w.dryRunTable())
	if err != nil {
		t.Fatal(err)
	}
	hc := unixClient(w.socket)

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		code         int
		want         []string
	}{
		{"syntax error", "POST", "/v1/overrides", `{"action": "drain", "resolver": "r1"`, 400, []string{"invalid JSON"}},
		{"syntax error inside", "POST", "/v1/overrides", `{"action": drain}`, 400, []string{"invalid JSON at byte"}},
		{"unknown field", "POST", "/v1/overrides", `{"action": "drain", "resolver": "r1", "colour": "blue"}`, 400, []string{`"colour"`}},
		{"wrong type", "POST", "/v1/overrides", `{"action": "drain", "resolver": 7}`, 400, []string{"resolver", "want a string"}},
		{"not an object", "POST", "/v1/overrides", `["drain", "r1"]`, 400, []string{"want a JSON object"}},
		{"missing resolver", "POST", "/v1/overrides", `{"action": "drain"}`, 400, []string{"resolver: missing"}},
		{"missing action", "POST", "/v1/overrides", `{"resolver": "r1"}`, 400, []string{"action: missing"}},
		{"unknown action", "POST", "/v1/overrides", `{"action": "explode", "resolver": "r1"}`, 400, []string{`"explode"`, "drain, disable or enable"}},
		{"pool and vip", "POST", "/v1/overrides", `{"action": "drain", "resolver": "r1", "pool": "main", "vip": "v4"}`, 400, []string{"pool and vip"}},
		{"trailing data", "POST", "/v1/overrides", `{"action": "drain", "resolver": "r1"} {}`, 400, []string{"trailing data"}},
		{"empty body", "POST", "/v1/overrides", ``, 400, []string{"empty request body"}},
		{"unknown resolver", "POST", "/v1/overrides", `{"action": "drain", "resolver": "r9"}`, 404, []string{`unknown resolver "r9"`}},
		{"wrong method", "GET", "/v1/overrides", ``, 405, []string{"method GET not allowed"}},
		{"unknown path", "GET", "/v1/nothing", ``, 404, []string{"/v1/nothing"}},
		{"unversioned path", "GET", "/status", ``, 404, []string{"/status"}},
	} {
		code, rep := rawRequest(t, hc, tc.method, tc.path, tc.body)
		if code != tc.code {
			t.Errorf("%s: %s %s %q: status %d, want %d (%q)", tc.name, tc.method, tc.path, tc.body, code, tc.code, rep.Error)
		}
		for _, s := range tc.want {
			if !strings.Contains(rep.Error, s) {
				t.Errorf("%s: message %q lacks %q", tc.name, rep.Error, s)
			}
		}
	}

	if _, err := os.Stat(filepath.Join(w.stateDir, "overrides.json")); !os.IsNotExist(err) {
		t.Errorf("an overrides file exists after refused requests (stat: %v)", err)
	}
	st := w.statusJSON()
	checkOverrides(t, st.Overrides)
	for _, name := range []string{"r1", "r2", "r3"} {
		if m, _ := member(st, "main", name); m.Override != "none" || m.Weight != uint32(w.layout.resolver(name).weight) {
			t.Errorf("member %s changed: %+v", name, m)
		}
	}
	after, err := os.ReadFile(w.dryRunTable())
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("the table changed:\n%s\nwas:\n%s", after, before)
	}
	for _, ev := range w.events() {
		if ev.Kind == control.EventOverride {
			t.Errorf("override event after refused requests: %+v", ev)
		}
	}
}

// TestUnreachable: lbctl exits 3 and says why when there is no socket,
// when the socket is stale (the daemon was killed), and when the daemon
// stopped cleanly (it removed its socket).
func TestUnreachable(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nothing-here.sock")
	r := run(t, binaries.lbctl, "-socket", missing, "status")
	if r.code != 3 || !strings.Contains(r.stderr, "no such socket") || !strings.Contains(r.stderr, missing) {
		t.Errorf("missing socket: want exit 3 with 'no such socket' naming %s; %s", missing, r)
	}

	w := newWorld(t, onePool(2))
	d := w.start()
	w.mustLbctl("status")
	d.kill9()
	if _, err := os.Stat(w.socket); err != nil {
		t.Fatalf("after kill -9 the socket should remain (stale): %v", err)
	}
	for _, args := range [][]string{{"status"}, {"drain", "r1"}, {"reload"}, {"events"}} {
		r := w.lbctl(args...)
		if r.code != 3 || !strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "stale socket") || !strings.Contains(r.stderr, w.socket) {
			t.Errorf("stale socket: lbctl %q: want exit 3 saying connection refused (stale socket) and naming it; %s", args, r)
		}
	}

	d = w.start()
	w.mustLbctl("status")
	d.stop()
	if r := w.lbctl("status"); r.code != 3 || !strings.Contains(r.stderr, "no such socket") {
		t.Errorf("stopped daemon: want exit 3 with 'no such socket'; %s", r)
	}
}

// unixClient is an HTTP client of the control socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
	}
}

// rawRequest sends body (JSON) and returns the status and the decoded
// error reply (empty for a 2xx).
func rawRequest(t *testing.T, hc *http.Client, method, path, body string) (int, control.ErrorReply) {
	t.Helper()
	req, err := http.NewRequest(method, "http://lbdnsd"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var rep control.ErrorReply
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Errorf("%s %s: status %d with a body that is not an ErrorReply: %v\n%s", method, path, resp.StatusCode, err, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: status %d with Content-Type %q", method, path, resp.StatusCode, ct)
		}
	}
	return resp.StatusCode, rep
}
