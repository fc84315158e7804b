package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lbdns/configs"
)

// TestCheckConfig runs check-config on the configs package's golden files
// from their directory, so that the messages name the files as the golden
// .err files do. It changes the working directory: not parallel.
func TestCheckConfig(t *testing.T) {
	t.Chdir("../configs/testdata")
	golden, err := os.ReadFile("bad-many.err")
	if err != nil {
		t.Fatal(err)
	}

	r := lbctl(t, "check-config", "bad-many.toml")
	if r.code != exitRefused {
		t.Fatalf("bad-many.toml: exit %d, want %d", r.code, exitRefused)
	}
	if r.stderr != string(golden) {
		t.Errorf("bad-many.toml: stderr differs from bad-many.err\n--- got:\n%s--- want:\n%s", r.stderr, golden)
	}
	if r.stdout != "" {
		t.Errorf("bad-many.toml: stdout %q, want nothing", r.stdout)
	}

	r = lbctl(t, "check-config", "bad-many.toml", "-o", "json")
	if r.code != exitRefused {
		t.Fatalf("json bad-many.toml: exit %d, want %d", r.code, exitRefused)
	}
	var res checkResult
	decodeJSON(t, r.stdout, &res)
	var texts []string
	for _, p := range res.Problems {
		texts = append(texts, p.Text)
		if p.File != "bad-many.toml" || p.Line == 0 || p.Message == "" || !strings.HasSuffix(p.Text, p.Message) {
			t.Errorf("problem %+v lacks its parts", p)
		}
	}
	if want := strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n"); res.Valid || !reflect.DeepEqual(texts, want) {
		t.Errorf("json: valid %v, problems\n%q\nwant\n%q", res.Valid, texts, want)
	}

	cfg, err := configs.Load("../minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	r = lbctl(t, "check-config", "../minimal.toml")
	if r.code != exitOK || r.stdout != cfg.Summary()+"\n" || r.stderr != "" {
		t.Errorf("minimal.toml: exit %d, stdout %q (want %q), stderr %q", r.code, r.stdout, cfg.Summary()+"\n", r.stderr)
	}
	r = lbctl(t, "-o", "json", "check-config", "../minimal.toml")
	res = checkResult{}
	decodeJSON(t, r.stdout, &res)
	if r.code != exitOK || !res.Valid || res.Summary != cfg.Summary() || len(res.Problems) != 0 || res.Warnings == nil || len(res.Warnings) != 0 {
		t.Errorf("json minimal.toml: exit %d, result %+v", r.code, res)
	}

	// A key without effect: valid, with a warning naming file, line and key.
	doc, err := os.ReadFile("../minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	doc = append(doc, "\n[gslb.server]\nreply_cache = true\n"...)
	warned := filepath.Join(t.TempDir(), "warned.toml")
	if err := os.WriteFile(warned, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`%s:%d: gslb.server.reply_cache: value "true": has no effect; the reply cache was removed`, warned, strings.Count(string(doc), "\n"))
	r = lbctl(t, "check-config", warned)
	if r.code != exitOK || r.stdout != cfg.Summary()+"\n" || r.stderr != "warning: "+text+"\n" {
		t.Errorf("warned.toml: exit %d, stdout %q, stderr %q (want %q)", r.code, r.stdout, r.stderr, "warning: "+text)
	}
	r = lbctl(t, "-o", "json", "check-config", warned)
	res = checkResult{}
	decodeJSON(t, r.stdout, &res)
	if r.code != exitOK || !res.Valid || len(res.Warnings) != 1 || res.Warnings[0].Text != text || res.Warnings[0].Key != "gslb.server.reply_cache" {
		t.Errorf("json warned.toml: exit %d, result %+v", r.code, res)
	}

	r = lbctl(t, "check-config", "no-such-file.toml")
	if r.code != exitRefused || !strings.Contains(r.stderr, "no-such-file.toml") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}
