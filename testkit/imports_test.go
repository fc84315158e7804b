package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// productFile is a non-test Go file of the module's product code.
type productFile struct {
	dir, file string   // its directory and path, slash-separated, from the module root
	imports   []string // its import paths
	ast       *ast.File
	fset      *token.FileSet // of ast
}

// productFiles returns every non-test .go file of the module outside
// testkit/, e2e/ and bench/ (the test kit, the end-to-end suite and the
// benchmarks) with its imports.
func productFiles(t *testing.T) []productFile {
	t.Helper()
	root := moduleRoot(t)
	var out []productFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".":
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", rel == "testkit", rel == "e2e", rel == "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pf := productFile{dir: filepath.ToSlash(filepath.Dir(rel)), file: rel, ast: f, fset: fset}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			pf.imports = append(pf.imports, p)
		}
		out = append(out, pf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found: is the module root right?")
	}
	return out
}

// under reports whether path is pkg or a package below it.
func under(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

// TestNoProductImportsTestkit: no product package imports the test kit
// (lbdns/testkit and below); only tests and benchmarks do.
func TestNoProductImportsTestkit(t *testing.T) {
	for _, f := range productFiles(t) {
		for _, imp := range f.imports {
			if under(imp, "lbdns/testkit") {
				t.Errorf("%s imports %s: the test kit is for tests (_test.go files, e2e/, bench/) only", f.file, imp)
			}
		}
	}
}

// labImporters lists the directories of product code that may import
// lbdns/internal/lab (the quick start's lab of real resolvers and DNS
// test servers), each with its reason.
func labImporters() map[string]string {
	return map[string]string{
		"cmd/lbdns-quickstart": "the quick start runs lbdnsd in front of the lab's resolvers: the lab is what it shows",
	}
}

// TestNoProductImportsLab: outside internal/lab itself, only the
// directories of labImporters import lbdns/internal/lab; and each of them
// still does.
func TestNoProductImportsLab(t *testing.T) {
	allowed := labImporters()
	used := map[string]bool{}
	for _, f := range productFiles(t) {
		for _, imp := range f.imports {
			if !under(imp, "lbdns/internal/lab") || under(f.dir, "internal/lab") {
				continue
			}
			if _, ok := allowed[f.dir]; ok {
				used[f.dir] = true
				continue
			}
			t.Errorf("%s imports %s: the lab is the quick start's (and tests'); a product package must not depend on it", f.file, imp)
		}
	}
	for dir, why := range allowed {
		if !used[dir] {
			t.Errorf("%s may import lbdns/internal/lab (%s) but no longer does: remove it from labImporters", dir, why)
		}
	}
}

// moduleRoot is the directory of the module's go.mod, above the test's
// working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
