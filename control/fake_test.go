package control

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend records the calls the servers make and answers with what a
// test put in it.
type fakeBackend struct {
	mu sync.Mutex

	status    *Status
	statusErr error
	// block, when set, makes Status wait for ctx to end and return its
	// error.
	block bool

	overrideReply *OverrideReply
	overrideErr   error
	reloadReply   *ReloadReply
	reloadErr     error

	statusCalls int
	overrides   []overrideCall
	gslb        []gslbCall
	reloads     int
}

type overrideCall struct {
	req OverrideRequest
	by  string
}

type gslbCall struct {
	req GSLBRequest
	by  string
}

func (f *fakeBackend) Status(ctx context.Context) (*Status, error) {
	f.mu.Lock()
	f.statusCalls++
	st, err, block := f.status, f.statusErr, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = &Status{Version: StatusVersion}
	}
	return st, nil
}

func (f *fakeBackend) SetOverride(_ context.Context, req OverrideRequest, by string) (*OverrideReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overrides = append(f.overrides, overrideCall{req, by})
	if f.overrideErr != nil {
		return nil, f.overrideErr
	}
	if f.overrideReply != nil {
		return f.overrideReply, nil
	}
	return &OverrideReply{Message: req.Resolver + " " + req.Action, Changed: true}, nil
}

func (f *fakeBackend) SetGSLB(_ context.Context, req GSLBRequest, by string) (*GSLBReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gslb = append(f.gslb, gslbCall{req, by})
	return &GSLBReply{Message: req.Action + " " + GSLBScope(req.Name, req.Zone), Changed: true}, nil
}

func (f *fakeBackend) Reload(context.Context) (*ReloadReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	if f.reloadErr != nil {
		return nil, f.reloadErr
	}
	if f.reloadReply != nil {
		return f.reloadReply, nil
	}
	return &ReloadReply{Summary: "reloaded"}, nil
}

// mutations returns how many SetOverride and Reload calls were made.
func (f *fakeBackend) mutations() (overrides, reloads int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.overrides), f.reloads
}

func (f *fakeBackend) lastOverride(t *testing.T) overrideCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.overrides) == 0 {
		t.Fatal("SetOverride was not called")
	}
	return f.overrides[len(f.overrides)-1]
}

// shortDir returns a fresh directory with a path short enough for a Unix
// socket (t.TempDir's can exceed the 108-byte limit).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// running is a control server serving on a real Unix socket.
type running struct {
	path string
	stop func() error
}

// startServer serves a Server over b and events on a new socket; the
// server stops at the end of the test unless stopped before.
func startServer(t *testing.T, opts ServerOptions) running {
	t.Helper()
	path := filepath.Join(shortDir(t), "run", "ctl.sock")
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(opts).Serve(ctx, ln) }()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-done:
			case <-time.After(10 * time.Second):
				t.Error("Serve did not return within 10s of its context ending")
			}
		})
		return serr
	}
	t.Cleanup(func() { _ = stop() })
	return running{path: path, stop: stop}
}

// unixHTTP returns an HTTP client whose every request goes to the socket
// at path.
func unixHTTP(path string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
		Timeout: 10 * time.Second,
	}
}

// reply is a finished HTTP exchange.
type reply struct {
	code   int
	header http.Header
	body   string
}

// do sends a request with body (none when nil) through c.
func do(t *testing.T, c *http.Client, method, url string, body []byte) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// contains fails the test unless s contains every sub.
func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}
