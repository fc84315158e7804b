package control

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

// httpStatusAllowed lists the directories outside control whose code may
// use net/http's Status constants, each with its reason: they speak HTTP
// of their own, not the control API.
func httpStatusAllowed() map[string]string {
	return map[string]string{
		"probes": "the http and https health checks read a back end's resp.StatusCode",
	}
}

// skippedDirs are the trees that are no product code: test kits, the
// end-to-end suite, benchmarks and the quick start's lab.
func skippedDirs() []string {
	return []string{"testkit", "e2e", "bench", "internal/lab"}
}

// TestHTTPStatusOnlyInControl: control is the only package that chooses
// HTTP status codes (a refusal elsewhere names its Kind); no other
// product package uses an http.Status* identifier, except those of
// httpStatusAllowed.
func TestHTTPStatusOnlyInControl(t *testing.T) {
	root := moduleRoot(t)
	allowed := httpStatusAllowed()
	used := map[string]bool{}
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
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || isSkipped(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "control" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, pos := range httpStatusUses(f) {
			if _, ok := allowed[dir]; ok {
				used[dir] = true
				continue
			}
			t.Errorf("%s: http.Status* outside control: name a control.Kind (control.Errorf) and let control choose the status", fset.Position(pos))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, why := range allowed {
		if !used[dir] {
			t.Errorf("%s is allowed http.Status* (%s) but uses none: remove it from httpStatusAllowed", dir, why)
		}
	}
}

// isSkipped reports whether the directory rel (slash-separated, relative
// to the module root) is or lies under one of skippedDirs.
func isSkipped(rel string) bool {
	for _, s := range skippedDirs() {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// httpStatusUses returns where f uses an identifier Status* of net/http
// (under whatever name f imports it; a dot import counts as a use).
func httpStatusUses(f *ast.File) []token.Pos {
	var names []string
	var uses []token.Pos
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != "net/http" {
			continue
		}
		switch {
		case imp.Name == nil:
			names = append(names, "http")
		case imp.Name.Name == ".":
			uses = append(uses, imp.Pos())
		case imp.Name.Name != "_":
			names = append(names, imp.Name.Name)
		}
	}
	if len(names) == 0 {
		return uses
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "Status") {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			for _, name := range names {
				if x.Name == name {
					uses = append(uses, sel.Pos())
				}
			}
		}
		return true
	})
	return uses
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

// TestKindStatus: every Kind has its own status, and the client reads
// the kind back from it.
func TestKindStatus(t *testing.T) {
	seen := map[int]Kind{}
	for k := Internal; k <= lastKind; k++ {
		code := k.httpStatus()
		if o, dup := seen[code]; dup {
			t.Errorf("%v and %v share status %d", o, k, code)
		}
		seen[code] = k
		if got := kindOf(code); got != k {
			t.Errorf("kindOf(%d) = %v, want %v", code, got, k)
		}
		if e := Errorf(k, "x"); e.Code != code || httpStatus(e) != code {
			t.Errorf("Errorf(%v): Code %d, replied %d, want %d", k, e.Code, httpStatus(e), code)
		}
	}
	if got := kindOf(502); got != Internal {
		t.Errorf("kindOf(502) = %v, want internal", got)
	}
}
