package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// page has an inline script that changes the DOM at once and a timer that
// changes it again a second later (virtual time), and paints the page a
// colour only the script knows.
const page = `<!doctype html>
<html><head><title>self-test</title>
<style>html, body { margin: 0; height: 100%; }</style></head>
<body><p id="target">static text</p><p id="timer">not yet</p>
<script>
  var el = document.getElementById("target");
  el.setAttribute("data-rendered", "yes");
  el.textContent = "computed " + (6 * 7);
  document.body.style.background = "rgb(" + [0, 128, 255].join(",") + ")";
  setTimeout(function () { document.getElementById("timer").textContent = "timer fired"; }, 1000);
</script></body></html>`

// servePage serves page on loopback until the test ends.
func servePage(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDumpDOMRunsScripts(t *testing.T) {
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dom, err := DumpDOM(ctx, servePage(t))
	if err != nil {
		t.Fatalf("DumpDOM: %v", err)
	}
	for _, want := range []string{`data-rendered="yes"`, ">computed 42<", ">timer fired<"} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %q (the page's scripts did not run):\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "static text") {
		t.Errorf("DOM still has the text the script replaced:\n%s", dom)
	}
}

func TestScreenshot(t *testing.T) {
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(ArtifactDir(t), "browser-selftest.png")
	const w, h = 320, 240
	if err := Screenshot(ctx, servePage(t), path, w, h); err != nil {
		t.Fatalf("Screenshot: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sig := []byte("\x89PNG\r\n\x1a\n"); len(b) <= len(sig) || !bytes.HasPrefix(b, sig) {
		t.Fatalf("%s (%d bytes) is not a PNG", path, len(b))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if got := img.Bounds().Size(); got.X != w || got.Y != h {
		t.Errorf("screenshot is %dx%d, want %dx%d", got.X, got.Y, w, h)
	}
	// The bottom corner is page background, painted by the script.
	r, g, bl, _ := img.At(w-10, h-10).RGBA()
	if got := [3]uint32{r >> 8, g >> 8, bl >> 8}; got != [3]uint32{0, 128, 255} {
		t.Errorf("background pixel %v, want the script's rgb(0,128,255)", got)
	}
}

func TestScreenshotBadSize(t *testing.T) {
	err := Screenshot(context.Background(), "http://127.0.0.1:1/", filepath.Join(t.TempDir(), "x.png"), 0, 100)
	if err == nil || !strings.Contains(err.Error(), "0x100") {
		t.Errorf("Screenshot with width 0: %v, want an error naming the size", err)
	}
}

// liveMembers returns the processes of group pgid that are not zombies
// (a zombie has exited; whether its parent reaps it is not ours to
// decide), as "pid:comm".
func liveMembers(t *testing.T, pgid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		out = append(out, e.Name()+":"+string(b[bytes.IndexByte(b, '(')+1:i]))
	}
	return out
}

func TestDeadlineKillsChromium(t *testing.T) {
	Require(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	// members is the process group as the page request found it.
	type attempt struct {
		pgid    int
		members []string
		hit     bool
	}
	var (
		mu  sync.Mutex
		cur *attempt
	)
	release := make(chan struct{})
	// The page never finishes loading, so Chromium waits until killed.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := cur; a != nil && a.pgid != 0 && !a.hit {
			a.hit = true
			a.members = liveMembers(t, a.pgid)
		}
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	// A deadline passed before Chromium asked for the page proves
	// nothing; on a loaded machine the start can take long, so such a
	// run is repeated with a longer deadline.
	for _, deadline := range []time.Duration{5 * time.Second, 15 * time.Second, 45 * time.Second} {
		a := &attempt{}
		mu.Lock()
		cur = a
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		_, err := dumpDOM(ctx, srv.URL, func(id int) {
			mu.Lock()
			a.pgid = id
			mu.Unlock()
		})
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("DumpDOM of a page that never loads: %v, want context.DeadlineExceeded", err)
		}
		if took > deadline+5*time.Second {
			t.Errorf("DumpDOM returned %s after its %s deadline", took-deadline, deadline)
		}
		mu.Lock()
		got := *a
		mu.Unlock()
		waitGroupGone(t, got.pgid)
		if !got.hit {
			t.Logf("chromium did not ask for the page within %s; trying a longer deadline", deadline)
			continue
		}
		t.Logf("process group %d while loading: %v", got.pgid, got.members)
		if len(got.members) < 2 {
			t.Errorf("process group %d had %d live processes while loading (%v), want chromium and its helpers", got.pgid, len(got.members), got.members)
		}
		return
	}
	t.Fatal("chromium never asked for the page: the deadlines prove nothing")
}

// waitGroupGone fails t unless group pgid has no live process within a
// few seconds.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for {
		left := liveMembers(t, pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("processes of group %d still alive after the run returned: %v", pgid, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunKillsWholeGroup proves the group kill with a stand-in browser
// whose helper, unlike Chromium's, does not die with its parent: it must
// be gone after a deadline and after a normal exit alike.
func TestRunKillsWholeGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	tests := []struct {
		name, script string
		timeout      time.Duration
		wantErr      error
	}{
		{"deadline", "sleep 300 &\nwait\n", time.Second, context.DeadlineExceeded},
		{"normal exit", "sleep 300 &\necho '<html></html>'\n", time.Minute, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := filepath.Join(t.TempDir(), "chromium")
			if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv(EnvPath, fake)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			var pgid int
			_, err := dumpDOM(ctx, "http://127.0.0.1:1/", func(id int) { pgid = id })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("dumpDOM: %v, want %v", err, tc.wantErr)
			}
			if pgid == 0 {
				t.Fatal("the started hook was not called")
			}
			waitGroupGone(t, pgid)
		})
	}
}

func TestChromiumFailureShowsStderr(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a shell script")
	}
	fake := filepath.Join(t.TempDir(), "chromium")
	script := "#!/bin/sh\necho 'noise line' >&2\necho 'fake chromium: cannot open display' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPath, fake)
	_, err := DumpDOM(context.Background(), "http://127.0.0.1:1/")
	if err == nil {
		t.Fatal("DumpDOM with a failing chromium: no error")
	}
	for _, want := range []string{"exit status 3", "fake chromium: cannot open display", "http://127.0.0.1:1/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestScreenshotMissingFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a shell script")
	}
	fake := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPath, fake)
	path := filepath.Join(t.TempDir(), "old.png")
	if err := os.WriteFile(path, []byte("left from an earlier run"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Screenshot(context.Background(), "http://127.0.0.1:1/", path, 100, 100)
	if err == nil || !strings.Contains(err.Error(), "without writing") {
		t.Errorf("Screenshot whose chromium writes nothing: %v, want an error", err)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "plain")
	if err := os.WriteFile(noExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env string
		found     bool
	}{
		{"missing", filepath.Join(dir, "nope"), false},
		{"directory", dir, false},
		{"not executable", noExec, false},
		{"executable", exe, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPath, tc.env)
			got, err := Find()
			if tc.found {
				if err != nil || got != tc.env {
					t.Errorf("Find() = %q, %v; want %q", got, err, tc.env)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Find() = %q, %v; want ErrNotFound", got, err)
			}
		})
	}
}

// fakeTB records how Require ended a test. Skipf and Fatalf end the
// goroutine as the real ones do.
type fakeTB struct {
	testing.TB
	how string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.how = "skip: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.how = "fatal: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRequire(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name, path, require, want string
	}{
		{"found", exe, "1", "returned " + exe},
		{"missing skips", missing, "", "skip: "},
		{"missing fails when required", missing, "1", "fatal: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPath, tc.path)
			t.Setenv(EnvRequire, tc.require)
			f := &fakeTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.how = "returned " + Require(f)
			}()
			<-done
			if !strings.HasPrefix(f.how, tc.want) {
				t.Errorf("Require: %s, want %s...", f.how, tc.want)
			}
		})
	}
}

func TestArtifactDir(t *testing.T) {
	t.Run("from the environment", func(t *testing.T) {
		want := filepath.Join(t.TempDir(), "a", "b")
		t.Setenv(EnvArtifacts, want)
		if got := ArtifactDir(t); got != want {
			t.Errorf("ArtifactDir() = %q, want %q", got, want)
		}
		if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
			t.Errorf("ArtifactDir did not create %s: %v", want, err)
		}
	})
	t.Run("default at the repository root", func(t *testing.T) {
		t.Setenv(EnvArtifacts, "")
		got := ArtifactDir(t)
		if filepath.Base(got) != "artifacts" {
			t.Errorf("ArtifactDir() = %q, want a directory named artifacts", got)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(got), "go.mod")); err != nil {
			t.Errorf("ArtifactDir() = %q is not beside go.mod: %v", got, err)
		}
		wd, _ := os.Getwd()
		if !strings.HasPrefix(wd, filepath.Dir(got)+string(filepath.Separator)) {
			t.Errorf("ArtifactDir() = %q is not above the working directory %s", got, wd)
		}
	})
}
