package report

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"lbdns/configs"
	"lbdns/control"
)

func TestReloadRejected(t *testing.T) {
	if err := ReloadRejected("lbdns.toml", nil); err != nil {
		t.Errorf("nil error: %v", err)
	}

	t.Run("invalid config lists every problem", func(t *testing.T) {
		_, perr := configs.Parse([]byte("[[resolver]]\nname = \"a\"\naddress = \"nope\"\n[bogus]\n"), "lbdns.toml")
		ps := configs.Problems(perr)
		if len(ps) < 2 {
			t.Fatalf("test config gives %d problems, want at least 2: %v", len(ps), perr)
		}
		var ce *control.Error
		if !errors.As(ReloadRejected("/etc/lbdns.toml", perr), &ce) {
			t.Fatalf("not a *control.Error: %v", perr)
		}
		if want := fmt.Sprintf("reload rejected, running config unchanged: %d problems in /etc/lbdns.toml", len(ps)); ce.Code != http.StatusUnprocessableEntity || ce.Message != want {
			t.Errorf("got %d %q, want 422 %q", ce.Code, ce.Message, want)
		}
		if len(ce.Problems) != len(ps) {
			t.Fatalf("problems %+v, want %d", ce.Problems, len(ps))
		}
		for i, p := range ps {
			want := control.Problem{File: p.File, Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Msg, Text: p.Error()}
			if ce.Problems[i] != want {
				t.Errorf("problem %d: %+v, want %+v", i, ce.Problems[i], want)
			}
		}
	})

	t.Run("cancelled request passes through", func(t *testing.T) {
		for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
			in := fmt.Errorf("reload: %w", cause)
			if got := ReloadRejected("lbdns.toml", in); got != in {
				t.Errorf("%v: got %v, want it unchanged", cause, got)
			}
		}
	})

	t.Run("other errors are 422 with their text", func(t *testing.T) {
		var ce *control.Error
		if !errors.As(ReloadRejected("lbdns.toml", errors.New("open lbdns.toml: permission denied")), &ce) {
			t.Fatal("not a *control.Error")
		}
		if want := "reload rejected, running config unchanged: open lbdns.toml: permission denied"; ce.Code != http.StatusUnprocessableEntity || ce.Message != want || ce.Problems != nil {
			t.Errorf("got %+v, want 422 %q without problems", ce, want)
		}
	})
}
