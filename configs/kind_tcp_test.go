package configs

import (
	"bytes"
	"strings"
	"testing"
)

// gslbDoc is okDoc with extra check profiles appended.
func gslbDoc(extra string) string { return okDoc + extra }

func TestTCPUDPDefaults(t *testing.T) {
	cfg, err := Parse([]byte(gslbDoc(`
[check.bare]
kind = "tcp"

[check.full]
kind = "tcp"
[check.full.tcp]
port = 443
send = "HEAD / HTTP/1.0\r\n\r\n"
expect = "^HTTP/1\\.[01] 200"
max_read = 100
tls = true
server_name = "www.example.net"

[check.u]
kind = "udp"

[check.uhex]
kind = "udp"
[check.uhex.udp]
port = 7
payload_hex = "de:ad be ef"
expect = "^\\xde"
`)), "k.toml")
	if err != nil {
		t.Fatal(err)
	}
	bare := cfg.Check("bare")
	if bare.TCP == nil || *bare.TCP != (TCPCheck{MaxRead: DefaultTCPMaxRead}) {
		t.Errorf("bare tcp = %+v, want only the default max_read", bare.TCP)
	}
	if bare.Spec() != bare.TCP {
		t.Errorf("Spec() = %#v, want the *TCPCheck", bare.Spec())
	}
	full := cfg.Check("full").TCP
	want := TCPCheck{Port: 443, Send: "HEAD / HTTP/1.0\r\n\r\n", Expect: `^HTTP/1\.[01] 200`, MaxRead: 100, TLS: true, ServerName: "www.example.net"}
	if *full != want {
		t.Errorf("full tcp = %+v, want %+v", *full, want)
	}
	if u := cfg.Check("u").UDP; u == nil || *u != (UDPCheck{}) {
		t.Errorf("bare udp = %+v, want zero settings", u)
	}
	p, err := cfg.Check("uhex").UDP.PayloadBytes()
	if err != nil || !bytes.Equal(p, []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("PayloadBytes() = %x, %v", p, err)
	}
	if cfg.Check("bare").ProbeIdentity() == cfg.Check("full").ProbeIdentity() {
		t.Errorf("different tcp settings share a probe identity")
	}
	if !strings.HasPrefix(cfg.Check("uhex").ProbeIdentity(), "udp ") {
		t.Errorf("udp identity = %q", cfg.Check("uhex").ProbeIdentity())
	}
}

func TestPoolNeedsDNSCheckUDP(t *testing.T) {
	doc := strings.Replace(okDoc, `check = "c"`, `check = "u"`, 1) + `
[check.u]
kind = "udp"
`
	_, err := Parse([]byte(doc), "k.toml")
	if err == nil || !strings.Contains(err.Error(), `pool[0].check: value "u": resolver pools need a dns check; udp checks are for GSLB members`) {
		t.Errorf("Parse = %v, want the pool's check refused", err)
	}
}
