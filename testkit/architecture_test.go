package testkit

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the import graph in ARCHITECTURE.md")

// The generated block of ARCHITECTURE.md lies between these markers.
const (
	importsBegin = "<!-- imports:begin -->\n"
	importsEnd   = "<!-- imports:end -->\n"
)

// TestArchitectureImports: the import graph in ARCHITECTURE.md (between
// importsBegin and importsEnd) is the module's: one line per product
// package, with the lbdns packages its non-test files import. With
// -update it rewrites the block.
func TestArchitectureImports(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "ARCHITECTURE.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, importsBegin)
	j := strings.Index(doc, importsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q block", path, strings.TrimSpace(importsBegin), strings.TrimSpace(importsEnd))
	}
	have := doc[i+len(importsBegin) : j]
	want := importGraph(t)
	if have == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(importsBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: import graph rewritten", path)
		return
	}
	haveLines, wantLines := strings.Split(have, "\n"), strings.Split(want, "\n")
	for _, l := range haveLines {
		if !slices.Contains(wantLines, l) {
			t.Errorf("ARCHITECTURE.md says, the code does not: %s", l)
		}
	}
	for _, l := range wantLines {
		if !slices.Contains(haveLines, l) {
			t.Errorf("the code says, ARCHITECTURE.md does not: %s", l)
		}
	}
	t.Errorf("ARCHITECTURE.md's import graph is not the code's: run go test ./testkit -run TestArchitectureImports -update, and check the prose around it")
}

// importGraph is the block of ARCHITECTURE.md: a code block with one line
// per product package, "pkg → dep, dep" (the lbdns packages it imports,
// without the module's prefix, sorted), packages sorted.
func importGraph(t *testing.T) string {
	deps := map[string][]string{}
	for _, f := range productFiles(t) {
		if _, ok := deps[f.dir]; !ok {
			deps[f.dir] = nil
		}
		for _, imp := range f.imports {
			if dep, ok := strings.CutPrefix(imp, "lbdns/"); ok && !slices.Contains(deps[f.dir], dep) {
				deps[f.dir] = append(deps[f.dir], dep)
			}
		}
	}
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	var sb strings.Builder
	sb.WriteString("```\n")
	for _, p := range pkgs {
		ds := deps[p]
		slices.Sort(ds)
		line := strings.Join(ds, ", ")
		if len(ds) == 0 {
			line = "(no lbdns package)"
		}
		sb.WriteString(p + " → " + line + "\n")
	}
	sb.WriteString("```\n")
	return sb.String()
}
