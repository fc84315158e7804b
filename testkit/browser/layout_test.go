package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMeasure loads a page that fits its window and one with a cell too
// wide for it, and checks that Measure reads the widths, the text and the
// element that overflows from the live page.
func TestMeasure(t *testing.T) {
	Require(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		width := "short"
		if r.URL.Path == "/wide" {
			width = strings.Repeat("a cell that does not wrap ", 100)
		}
		fmt.Fprintf(w, `<!doctype html><html><body style="margin:0"><p>hello layout</p><table><tr><td id="cell" style="white-space:nowrap">%s</td></tr></table></body></html>`, width)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	l, err := Measure(ctx, srv.URL+"/narrow", 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	if l.ClientWidth < 1200 || l.ClientWidth > 1280 || l.Overflows() || len(l.Overflowing) != 0 {
		t.Errorf("narrow page at 1280 px: %+v, want a client width near 1280 and no overflow", l)
	}
	if !strings.Contains(l.Text, "hello layout") {
		t.Errorf("text %q lacks the page's text", l.Text)
	}

	l, err = Measure(ctx, srv.URL+"/wide", 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Overflows() || l.ScrollWidth < 2000 {
		t.Errorf("wide page at 1280 px: %+v, want a scroll width well above 1280 px", l)
	}
	if len(l.Overflowing) == 0 || !strings.HasPrefix(l.Overflowing[0], "td#cell") {
		t.Errorf("overflowing elements %q, want td#cell first", l.Overflowing)
	}
}
