package probes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// chaosHandler answers CHAOS TXT version.bind. like a vendor would: with
// txt, or with rcode when txt is empty.
func chaosHandler(txt string, rcode int) handler {
	return func(req *dns.Msg) *dns.Msg {
		q := req.Question[0]
		if q.Qclass != dns.ClassCHAOS || q.Qtype != dns.TypeTXT || !strings.EqualFold(q.Name, "version.bind.") {
			return answer(req, dns.RcodeRefused)
		}
		if txt == "" {
			return answer(req, rcode)
		}
		r := answer(req, dns.RcodeSuccess)
		r.Answer = append(r.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS},
			Txt: []string{txt},
		})
		return r
	}
}

func TestIdentify(t *testing.T) {
	tests := []struct {
		name       string
		h          handler
		want       string
		wantVendor string
		wantErr    string // substring; "" means no error
		noVersion  bool   // error wraps ErrNoVersion
	}{
		{name: "unbound", h: chaosHandler("unbound 1.17.1", 0), want: "unbound 1.17.1", wantVendor: "unbound"},
		{name: "bind", h: chaosHandler("9.18.49-1~deb12u3-Debian", 0), want: "9.18.49-1~deb12u3-Debian", wantVendor: "bind"},
		{name: "powerdns", h: chaosHandler("PowerDNS Recursor 4.8.8", 0), want: "PowerDNS Recursor 4.8.8", wantVendor: "powerdns"},
		{name: "dnsmasq", h: chaosHandler("dnsmasq-2.90", 0), want: "dnsmasq-2.90", wantVendor: "dnsmasq"},
		{name: "knot resolver servfail", h: chaosHandler("", dns.RcodeServerFailure), wantErr: "rcode SERVFAIL", noVersion: true},
		{name: "refused", h: chaosHandler("", dns.RcodeRefused), wantErr: "rcode REFUSED", noVersion: true},
		{name: "noerror without txt", h: chaosHandler("", dns.RcodeSuccess), wantErr: "no TXT answer", noVersion: true},
		{name: "wrong id", h: func(req *dns.Msg) *dns.Msg {
			r := chaosHandler("unbound 1.17.1", 0)(req)
			r.Id++
			return r
		}, wantErr: "id mismatch"},
		{name: "silent", h: silent, wantErr: "timeout after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.h, nil)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			got, err := Identify(ctx, srv.Addr)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Identify: %v", err)
				}
				if got != tt.want {
					t.Errorf("Identify = %q, want %q", got, tt.want)
				}
				if v := VendorOf(got); v != tt.wantVendor {
					t.Errorf("VendorOf(%q) = %q, want %q", got, v, tt.wantVendor)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Identify error = %v, want it to contain %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrNoVersion) != tt.noVersion {
				t.Errorf("errors.Is(err, ErrNoVersion) = %v, want %v", !tt.noVersion, tt.noVersion)
			}
		})
	}
}

func TestVendorOf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"unbound 1.17.1", "unbound"},
		{"9.18.49-1~deb12u3-Debian", "bind"},
		{"9.16.1", "bind"},
		{"BIND 9.18.1", "bind"},
		{"PowerDNS Recursor 4.8.8", "powerdns"},
		{"dnsmasq-2.90", "dnsmasq"},
		{"Knot Resolver 5.6.0", "knot"},
		{"", ""},
		{"9.", ""},
		{"9.18", ""},
		{"9.x.1", ""},
		{"19.1.1", ""},
		{"go away", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := VendorOf(tt.in); got != tt.want {
				t.Errorf("VendorOf(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
