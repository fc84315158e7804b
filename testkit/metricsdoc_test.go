package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metricName is a metric family name as the code writes it (one ending
// in "_" is a prefix names are built from, which the test refuses).
var metricName = regexp.MustCompile(`^lbdns_[a-z0-9_]+$`)

// TestMetricsDocumented: every lbdns_ metric family the product code
// declares (a prometheus Opts literal with Namespace "lbdns", or a
// whole "lbdns_..." name given to a Desc) is named in the metrics guide,
// docs/status-and-metrics.md, whichever daemon configuration exports it
// (the fleet, BGP and dnstap ones included). The end-to-end tests check
// the same against what running daemons export.
func TestMetricsDocumented(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "status-and-metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{} // family → where it is declared
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(rel, "testkit"+string(filepath.Separator)) || strings.HasPrefix(rel, "bench"+string(filepath.Separator)) {
			return nil // test kits and benchmark tools export nothing of the daemon's
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, name := range declaredMetrics(f) {
			if _, ok := found[name]; !ok {
				found[name] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, where := range found {
		if strings.HasSuffix(name, "_") {
			t.Errorf("%s builds metric names from the prefix %q: write each name whole, so that it can be found and checked", where, name)
		}
	}
	if len(found) < 50 {
		t.Fatalf("found only %d metric families in the code: the scan is broken", len(found))
	}
	var missing []string
	for name, where := range found {
		if !strings.Contains(string(doc), "`"+strings.TrimPrefix(name, "lbdns_")+"`") {
			missing = append(missing, name+" ("+where+")")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("docs/status-and-metrics.md does not name %d metric families:\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
}

// declaredMetrics returns the lbdns_ metric family names f declares:
// composite literals with Namespace "lbdns" (joined with their
// Subsystem and Name, as prometheus.BuildFQName does) and string
// literals that are a whole family name.
func declaredMetrics(f *ast.File) []string {
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			kv := map[string]string{}
			for _, e := range n.Elts {
				p, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				k, ok1 := p.Key.(*ast.Ident)
				v, ok2 := p.Value.(*ast.BasicLit)
				if ok1 && ok2 && v.Kind == token.STRING {
					kv[k.Name], _ = strconv.Unquote(v.Value)
				}
			}
			if kv["Namespace"] == "lbdns" && kv["Name"] != "" {
				parts := []string{"lbdns"}
				if kv["Subsystem"] != "" {
					parts = append(parts, kv["Subsystem"])
				}
				names = append(names, strings.Join(append(parts, kv["Name"]), "_"))
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && metricName.MatchString(s) {
				names = append(names, s)
			}
		}
		return true
	})
	return names
}
