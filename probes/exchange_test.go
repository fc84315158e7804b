package probes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestExchange checks the reply validation Exchange shares with the probe,
// against loopback servers that misbehave on purpose.
func TestExchange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       handler
		tcp     handler
		wantErr string
		check   func(t *testing.T, r *dns.Msg)
	}{
		{name: "good", h: good, check: func(t *testing.T, r *dns.Msg) {
			if r.Rcode != dns.RcodeSuccess {
				t.Errorf("rcode %d", r.Rcode)
			}
		}},
		{name: "servfail is returned, not judged", h: rcodeHandler(dns.RcodeServerFailure), check: func(t *testing.T, r *dns.Msg) {
			if r.Rcode != dns.RcodeServerFailure {
				t.Errorf("rcode %d, want SERVFAIL", r.Rcode)
			}
		}},
		{name: "wrong id", h: mutate(func(r *dns.Msg) { r.Id++ }), wantErr: "id mismatch"},
		{name: "wrong question", h: mutate(func(r *dns.Msg) { r.Question[0].Name = "other.example." }), wantErr: "question mismatch"},
		{name: "not a response", h: mutate(func(r *dns.Msg) { r.Response = false }), wantErr: "not a response"},
		{name: "silence", h: silent, wantErr: "timeout after"},
		{name: "truncated then tcp", h: truncated, tcp: good, check: func(t *testing.T, r *dns.Msg) {
			if r.Truncated {
				t.Error("got the truncated UDP reply, not the TCP one")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServer(t, tc.h, tc.tcp).Addr
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			q := new(dns.Msg)
			q.SetQuestion("www.example.", dns.TypeA)
			r, err := Exchange(ctx, addr, q)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}
