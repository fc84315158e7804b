package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag: -version prints the build's version and exits 0.
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "lbdnsd ") || !strings.Contains(out, " rev ") {
		t.Errorf("stdout %q, want \"lbdnsd VERSION rev REVISION\"", out)
	}
}

// TestMistypedFlag: an unknown flag gets a suggestion and exit 2.
func TestMistypedFlag(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"-dryrun", `flag provided but not defined: -dryrun (did you mean "-dry-run"?)`},
		{"-chek-config", `(did you mean "-check-config"?)`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{tc.arg}, &stdout, &stderr); code != 2 {
			t.Fatalf("%s: exit %d, want 2", tc.arg, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: stderr does not contain %q:\n%s", tc.arg, tc.want, stderr.String())
		}
	}
}

// TestCheckConfigSummaryNamesZones: the summary of a configuration with a
// responder says where it listens and counts its zones and names.
func TestCheckConfigSummaryNamesZones(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := checkConfig("../../configs/testdata/gslb-names.toml", &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"gslb zone", "gslb names"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary %q lacks %q", out, want)
		}
	}
}

// TestCheckConfigWarns: a configuration that sets a key without effect
// ([gslb.server] reply_cache) is valid (exit 0, its summary on stdout)
// and the warning, with the file, line and key, is on stderr.
func TestCheckConfigWarns(t *testing.T) {
	doc, err := os.ReadFile("../../configs/testdata/gslb-names.toml")
	if err != nil {
		t.Fatal(err)
	}
	doc = append(doc, "\n[gslb.server]\nreply_cache = false\n"...)
	path := filepath.Join(t.TempDir(), "lbdns.toml")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	line := bytes.Count(doc, []byte("\n")) // the last line's
	var stdout, stderr bytes.Buffer
	if code := checkConfig(path, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	want := fmt.Sprintf("warning: %s:%d: gslb.server.reply_cache: value \"false\": has no effect; the reply cache was removed\n", path, line)
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), "gslb names") {
		t.Errorf("summary %q", stdout.String())
	}
}

// TestCheckConfigBadFile: a configuration with problems exits 1 with
// every problem on stderr and nothing on stdout (the checks after the
// configuration's own are not run on a configuration that failed).
func TestCheckConfigBadFile(t *testing.T) {
	want, err := os.ReadFile("../../configs/testdata/bad-address.err")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := checkConfig("../../configs/testdata/bad-address.toml", &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(want)), "\n")
	if _, msg, ok := strings.Cut(first, ": "); !ok || !strings.Contains(stderr.String(), msg) {
		t.Errorf("stderr lacks the golden problem %q:\n%s", first, stderr.String())
	}
}
