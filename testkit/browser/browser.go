package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// Environment variables read by this package.
const (
	// EnvPath names the Chromium binary to use instead of DefaultPath.
	EnvPath = "LBDNS_CHROMIUM"
	// EnvRequire set to "1" makes Require fail a test, instead of
	// skipping it, when Chromium is missing.
	EnvRequire = "LBDNS_REQUIRE_BROWSER"
	// EnvArtifacts names the directory ArtifactDir returns.
	EnvArtifacts = "LBDNS_ARTIFACTS"
)

// DefaultPath is where Debian's chromium package installs the browser.
const DefaultPath = "/usr/bin/chromium"

// VirtualTimeBudget is the virtual time, in milliseconds, a page gets to
// load and run its scripts before its DOM is dumped or its screenshot
// taken. Virtual time runs ahead while the page is idle, so a budget of a
// few seconds costs far less in real time; it stands still while a
// request is pending. It must stay below the refresh interval of pages that
// reload themselves (lbdns's status page: 5 s): at 5,000 ms the page's
// own refresh raced the screenshot, which then was sometimes not written.
const VirtualTimeBudget = 2000

// ErrNotFound is wrapped by Find's error when there is no Chromium.
var ErrNotFound = errors.New("browser: chromium not found")

// Flags returns the flags every run starts with: headless, no sandbox
// (tests run as root), no GPU, and nothing that reaches out to the network
// on its own (the test machines have none beyond loopback).
func Flags() []string {
	return []string{
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
	}
}

// Find returns the path of the Chromium binary: $LBDNS_CHROMIUM when set,
// else DefaultPath. The error wraps ErrNotFound when that file is missing
// or not executable.
func Find() (string, error) {
	path := DefaultPath
	if p := os.Getenv(EnvPath); p != "" {
		path = p
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w (install Debian's chromium package or set %s)", ErrNotFound, err, EnvPath)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", ErrNotFound, path)
	}
	return path, nil
}

// DumpDOM loads url, lets its scripts run for VirtualTimeBudget of virtual
// time, and returns the serialised DOM (--dump-dom). The run is bounded by
// ctx.
func DumpDOM(ctx context.Context, url string) (string, error) {
	return dumpDOM(ctx, url, nil)
}

// Profile is what a run's fresh profile starts with besides Chromium's
// defaults.
type Profile struct {
	// LocalState is the JSON of the profile's "Local State" file, the
	// browser-wide settings (for example "dns_over_https": {"mode":
	// "secure", "templates": "https://..."}); nil: none.
	LocalState []byte
	// Flags are command-line flags added to Flags.
	Flags []string
}

// DumpDOMProfile is DumpDOM with a profile that starts as p says.
func DumpDOMProfile(ctx context.Context, url string, p Profile) (string, error) {
	return dumpDOMWith(ctx, url, p, nil)
}

// dumpDOM is DumpDOM with a hook called with the process group's id once
// Chromium has started.
func dumpDOM(ctx context.Context, url string, started func(pgid int)) (string, error) {
	return dumpDOMWith(ctx, url, Profile{}, started)
}

// dumpDOMWith is DumpDOMProfile with dumpDOM's hook.
func dumpDOMWith(ctx context.Context, url string, p Profile, started func(pgid int)) (string, error) {
	out, err := runWith(ctx, p, append(slices.Clip(p.Flags),
		"--virtual-time-budget="+strconv.Itoa(VirtualTimeBudget),
		"--dump-dom",
		url,
	), started)
	if err != nil {
		return "", fmt.Errorf("browser: dump dom of %s: %w", url, err)
	}
	return string(out), nil
}

// Screenshot loads url in a window of width x height pixels, lets its
// scripts run as DumpDOM does, and writes a PNG of the viewport to path.
// The run is bounded by ctx.
func Screenshot(ctx context.Context, url, path string, width, height int) error {
	if width <= 0 || height <= 0 {
		return fmt.Errorf("browser: screenshot of %s: window size %dx%d is not positive", url, width, height)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("browser: screenshot of %s: %w", url, err)
	}
	// A file left from an earlier run must not pass for this one's.
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("browser: screenshot of %s: %w", url, err)
	}
	_, err = run(ctx, []string{
		"--virtual-time-budget=" + strconv.Itoa(VirtualTimeBudget),
		"--screenshot=" + abs,
		fmt.Sprintf("--window-size=%d,%d", width, height),
		"--hide-scrollbars",
		url,
	}, nil)
	if err != nil {
		return fmt.Errorf("browser: screenshot of %s: %w", url, err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
		return fmt.Errorf("browser: screenshot of %s: chromium exited without writing %s", url, abs)
	}
	return nil
}

// run starts Chromium with Flags, a fresh profile and args in a process
// group of its own, and returns what it wrote to standard output. When ctx
// is done the group is killed; when Chromium exits, whatever is left of
// the group is killed too. Output goes to files, not pipes, so a helper
// that holds them open cannot delay the return.
func run(ctx context.Context, args []string, started func(pgid int)) ([]byte, error) {
	return runWith(ctx, Profile{}, args, started)
}

// runWith is run with a profile that starts as p says (p.Flags are
// already in args).
func runWith(ctx context.Context, p Profile, args []string, started func(pgid int)) ([]byte, error) {
	path, err := Find()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lbdns-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()

	profile := filepath.Join(dir, "profile")
	if p.LocalState != nil {
		if err := os.MkdirAll(profile, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(profile, "Local State"), p.LocalState, 0o600); err != nil {
			return nil, err
		}
	}
	argv := append(Flags(), "--user-data-dir="+profile)
	cmd := exec.CommandContext(ctx, path, append(argv, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Dir = dir
	ownGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	werr := cmd.Wait()
	// The leader is gone; its helpers may not be. The group id cannot be
	// taken by a new process while any member is alive.
	killGroup(cmd.Process.Pid)
	if werr != nil {
		msg := tail(stderr.Name(), 2048)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (chromium killed: %w)\n%s", ctx.Err(), werr, msg)
		}
		return nil, fmt.Errorf("chromium: %w\n%s", werr, msg)
	}
	return os.ReadFile(stdout.Name())
}

// tail returns up to the last n bytes of the file at path, starting at a
// line, for an error message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no stderr: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimSpace(b))
}
