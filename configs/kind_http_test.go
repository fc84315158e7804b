package configs

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHTTPDefaults(t *testing.T) {
	doc := okDoc + `
[check.web]
kind = "http"

[check.tls]
kind = "https"
[check.tls.https]
path = "/healthz"
status = ["2xx", "301"]
ca_file = "/etc/lbdns/ca.pem"
[check.tls.https.headers]
X-Probe = "lbdns"
`
	cfg, err := Parse([]byte(doc), "h.toml")
	if err != nil {
		t.Fatal(err)
	}
	web := cfg.Check("web")
	want := HTTPCheck{Method: "GET", Path: "/", Status: []string{"200-299"}, MaxBody: 64 << 10}
	if web.HTTP == nil || SpecIdentity(web.HTTP) != SpecIdentity(&want) {
		t.Errorf("http defaults = %+v, want %+v", web.HTTP, want)
	}
	if web.Spec() != web.HTTP || web.HTTPS != nil {
		t.Errorf("Spec() = %#v, want the *HTTPCheck of kind http only", web.Spec())
	}
	tls := cfg.Check("tls").HTTPS
	switch {
	case tls == nil:
		t.Fatal("https settings not set")
	case tls.Path != "/healthz" || tls.Method != "GET" || !slices.Equal(tls.Status, []string{"2xx", "301"}):
		t.Errorf("https settings = %+v", tls)
	case tls.CertExpiryWarn.Duration != 14*24*time.Hour:
		t.Errorf("cert_expiry_warn = %v, want 336h", tls.CertExpiryWarn)
	case tls.Headers["X-Probe"] != "lbdns" || tls.CAFile != "/etc/lbdns/ca.pem":
		t.Errorf("headers or ca_file not decoded: %+v", tls)
	}
	if web.ProbeIdentity() == cfg.Check("tls").ProbeIdentity() {
		t.Error("http and https checks share a probe identity")
	}
	changed := *tls
	changed.Headers = map[string]string{"X-Probe": "other"}
	if SpecIdentity(&changed) == SpecIdentity(tls) {
		t.Error("a header value does not change the identity")
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in      string
		want    StatusRange
		wantErr string
	}{
		{"200", StatusRange{200, 200}, ""},
		{"200-299", StatusRange{200, 299}, ""},
		{" 301 ", StatusRange{301, 301}, ""},
		{"2xx", StatusRange{200, 299}, ""},
		{"5XX", StatusRange{500, 599}, ""},
		{"6xx", StatusRange{}, "not a status code"},
		{"99", StatusRange{}, "not a status code"},
		{"600", StatusRange{}, "not a status code"},
		{"300-200", StatusRange{}, "is empty"},
		{"200-", StatusRange{}, "not a status code"},
		{"", StatusRange{}, "not a status code"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseStatus(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStatus(%q) = %v, %v; want error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseStatus(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if !got.Contains(tt.want.Lo) || !got.Contains(tt.want.Hi) || got.Contains(tt.want.Hi+1) {
				t.Errorf("%v.Contains wrong at its edges", got)
			}
		})
	}
	if s := (StatusRange{200, 299}).String(); s != "200-299" {
		t.Errorf("String() = %q", s)
	}
}

// TestPoolNeedsDNSCheck: a resolver pool refuses a check of another known
// kind at pool.check; an unknown kind is reported at the check only.
func TestPoolNeedsDNSCheck(t *testing.T) {
	doc := strings.Replace(okDoc, "[check.c.dns]\nqname = \"example.com\"\n", "[check.c]\nkind = \"https\"\n", 1)
	_, err := Parse([]byte(doc), "p.toml")
	ps := Problems(err)
	want := Problem{File: "p.toml", Line: 10, Key: "pool[0].check", Value: "c",
		Msg: "resolver pools need a dns check; https checks are for GSLB members"}
	if len(ps) != 1 || ps[0] != want {
		t.Fatalf("problems = %#v, want %#v", ps, want)
	}
	doc = strings.Replace(okDoc, "[check.c.dns]\nqname = \"example.com\"\n", "[check.c]\nkind = \"smtp\"\n", 1)
	_, err = Parse([]byte(doc), "p.toml")
	ps = Problems(err)
	if len(ps) != 1 || ps[0].Key != "check.c.kind" {
		t.Fatalf("problems = %#v, want only check.c.kind", ps)
	}
}
