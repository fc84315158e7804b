package testkit

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// httpStatusAllowed lists the directories outside control whose code may
// use net/http's Status constants, each with its reason: they speak HTTP
// of their own, not the control API.
func httpStatusAllowed() map[string]string {
	return map[string]string{
		"probes":        "the http and https health checks read a back end's resp.StatusCode",
		"responder/doh": "DNS over HTTPS and the JSON API answer apps over HTTP of their own, with the status codes RFC 8484 names",
	}
}

// TestHTTPStatusOnlyInControl: control is the only package that chooses
// HTTP status codes (a refusal elsewhere names its Kind); no other
// product package uses an http.Status* identifier, except those of
// httpStatusAllowed.
func TestHTTPStatusOnlyInControl(t *testing.T) {
	allowed := httpStatusAllowed()
	used := map[string]bool{}
	for _, f := range productFiles(t) {
		if f.dir == "control" || under(f.dir, "internal/lab") {
			continue
		}
		for _, pos := range httpStatusUses(f.ast) {
			if _, ok := allowed[f.dir]; ok {
				used[f.dir] = true
				continue
			}
			t.Errorf("%s: http.Status* outside control: name a control.Kind (control.Errorf) and let control choose the status", f.fset.Position(pos))
		}
	}
	for dir, why := range allowed {
		if !used[dir] {
			t.Errorf("%s is allowed http.Status* (%s) but uses none: remove it from httpStatusAllowed", dir, why)
		}
	}
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
