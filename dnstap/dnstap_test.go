package dnstap

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/protobuf/encoding/protowire"
)

func wire(t testing.TB, name string, qtype uint16, rcode int, response bool) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if response {
		m.Response = true
		m.Rcode = rcode
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeClientMessages(t *testing.T) {
	when := time.Date(2026, 12, 1, 14, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		p    Payload
		want Message
	}{
		{
			"query v4",
			Payload{Identity: "r1", Version: "unbound 1.17.1", Type: ClientQuery, Protocol: UDP,
				Client: netip.MustParseAddrPort("192.0.2.7:5353"), Server: netip.MustParseAddrPort("198.51.100.1:53"),
				Time: when, DNS: wire(t, "WWW.Example.COM.", dns.TypeAAAA, 0, false)},
			Message{Identity: "r1", Version: "unbound 1.17.1", Type: ClientQuery, Protocol: UDP,
				Client: netip.MustParseAddr("192.0.2.7"), ClientPort: 5353, Server: netip.MustParseAddr("198.51.100.1"),
				Time: when, QueryTime: when, Name: "www.example.com.", QType: dns.TypeAAAA, QClass: dns.ClassINET, Rcode: -1},
		},
		{
			"response v6 nxdomain",
			Payload{Type: ClientResponse, Protocol: TCP, Client: netip.MustParseAddrPort("[2001:db8::9]:40000"),
				Time: when, DNS: wire(t, "nope.example.", dns.TypeA, dns.RcodeNameError, true)},
			Message{Type: ClientResponse, Protocol: TCP, Client: netip.MustParseAddr("2001:db8::9"), ClientPort: 40000,
				Time: when, Name: "nope.example.", QType: dns.TypeA, QClass: dns.ClassINET, Rcode: dns.RcodeNameError},
		},
		{
			"root name, no time",
			Payload{Type: ClientQuery, DNS: wire(t, ".", dns.TypeNS, 0, false)},
			Message{Type: ClientQuery, Name: ".", QType: dns.TypeNS, QClass: dns.ClassINET, Rcode: -1},
		},
		{
			"other type",
			Payload{Identity: "r2", Type: ResolverQuery, DNS: []byte{1, 2, 3}},
			Message{Identity: "r2", Type: ResolverQuery, Rcode: -1},
		},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			if err := d.Decode(AppendPayload(nil, tt.p), &m); err != nil {
				t.Fatal(err)
			}
			if m != tt.want {
				t.Errorf("decoded\n%+v\nwant\n%+v", m, tt.want)
			}
		})
	}
}

func TestDecodeMappedAddress(t *testing.T) {
	var d Decoder
	var m Message
	p := Payload{Type: ClientQuery, Client: netip.MustParseAddrPort("[::ffff:10.1.2.3]:53"), DNS: wire(t, "a.", dns.TypeA, 0, false)}
	if err := d.Decode(AppendPayload(nil, p), &m); err != nil {
		t.Fatal(err)
	}
	if m.Client != netip.MustParseAddr("10.1.2.3") {
		t.Errorf("client %v, want 10.1.2.3", m.Client)
	}
}

func TestDecodeKeepsIdentity(t *testing.T) {
	var d Decoder
	var m1, m2 Message
	p := Payload{Identity: "resolver-1", Version: "v", Type: ClientQuery, DNS: wire(t, "a.", dns.TypeA, 0, false)}
	b := AppendPayload(nil, p)
	if err := d.Decode(b, &m1); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(b, &m2); err != nil {
		t.Fatal(err)
	}
	if m1.Identity != "resolver-1" || m2.Identity != "resolver-1" {
		t.Fatalf("identities %q %q", m1.Identity, m2.Identity)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = d.Decode(b, &m1) }); allocs > 1 {
		t.Errorf("%v allocations per message, want at most 1 (the name)", allocs)
	}
}

func TestDecodeMalformed(t *testing.T) {
	q := wire(t, "a.example.", dns.TypeA, 0, false)
	good := AppendPayload(nil, Payload{Type: ClientQuery, DNS: q})
	msgOnly := func(fields ...[]byte) []byte {
		var m []byte
		for _, f := range fields {
			m = append(m, f...)
		}
		b := protowire.AppendTag(nil, fDnstapMessage, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
		b = protowire.AppendTag(b, fDnstapType, protowire.VarintType)
		return protowire.AppendVarint(b, 1)
	}
	typeField := func(v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, fMsgType, protowire.VarintType), v)
	}
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"garbage", []byte("not a protobuf at all")},
		{"truncated", good[:len(good)-3]},
		{"no type", good[:len(good)-2]},
		{"type 2", append(good[:len(good)-1:len(good)-1], 2)},
		{"no message", []byte{fDnstapType << 3, 1}},
		{"message without type", msgOnly(bytesField(fMsgQueryMessage, q))},
		{"query without message", msgOnly(typeField(uint64(ClientQuery)))},
		{"response without message", msgOnly(typeField(uint64(ClientResponse)), bytesField(fMsgQueryMessage, q))},
		{"bad address", msgOnly(typeField(uint64(ClientQuery)), bytesField(fMsgQueryAddr, []byte{1, 2, 3}), bytesField(fMsgQueryMessage, q))},
		{"short dns", msgOnly(typeField(uint64(ClientQuery)), bytesField(fMsgQueryMessage, q[:11]))},
		{"no question", msgOnly(typeField(uint64(ClientQuery)), bytesField(fMsgQueryMessage, make([]byte, 12)))},
		{"truncated question", msgOnly(typeField(uint64(ClientQuery)), bytesField(fMsgQueryMessage, q[:len(q)-2]))},
		{"pointer loop", msgOnly(typeField(uint64(ClientQuery)), bytesField(fMsgQueryMessage, []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}))},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Message
			if err := d.Decode(tt.b, &m); !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
		})
	}
}

func TestTypeString(t *testing.T) {
	if ClientQuery.String() != "client_query" || UpdateResponse.String() != "update_response" || Type(99).String() != "type 99" || Type(0).String() != "type 0" {
		t.Error("Type.String")
	}
}

// FuzzDecode decodes arbitrary payloads: never a panic, every error wraps
// ErrMalformed, and a client message decoded without error has a fully
// qualified name (and a response an rcode of four bits).
func FuzzDecode(f *testing.F) {
	when := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.Add(AppendPayload(nil, Payload{Identity: "r", Version: "v", Type: ClientQuery, Client: netip.MustParseAddrPort("127.0.0.2:999"), Time: when, DNS: wire(f, "www.example.", dns.TypeA, 0, false)}))
	f.Add(AppendPayload(nil, Payload{Type: ClientResponse, Client: netip.MustParseAddrPort("[::1]:53"), Time: when, DNS: wire(f, "x.", dns.TypeMX, 2, true)}))
	f.Add(AppendPayload(nil, Payload{Type: AuthQuery}))
	f.Add([]byte{0x7a, 0x00, 0x78, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decoder
		var m Message
		if err := d.Decode(b, &m); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !m.Type.Client() {
			return
		}
		if len(m.Name) == 0 || m.Name[len(m.Name)-1] != '.' {
			t.Fatalf("name %q", m.Name)
		}
		if m.Type == ClientResponse && (m.Rcode < 0 || m.Rcode > 15) {
			t.Fatalf("rcode %d", m.Rcode)
		}
	})
}

// TestDecodeVendorCaptures decodes the frames captured from Debian's
// unbound, BIND and Knot Resolver (the seed corpus of FuzzDecode): each
// was a query from 127.0.0.2 for www or nope under dnstest's zone, sent
// with identity resolver-1.
func TestDecodeVendorCaptures(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("%d captures, want 12 (4 per vendor)", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, lit, ok := strings.Cut(strings.TrimSpace(string(raw)), "\n[]byte(")
			if !ok {
				t.Fatalf("not a fuzz corpus file: %q", raw)
			}
			b, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
			if err != nil {
				t.Fatal(err)
			}
			var d Decoder
			var m Message
			if err := d.Decode([]byte(b), &m); err != nil {
				t.Fatal(err)
			}
			wantType := ClientQuery
			if strings.Contains(f, "client_response") {
				wantType = ClientResponse
			}
			if m.Type != wantType || m.Identity != "resolver-1" || m.Client != netip.MustParseAddr("127.0.0.2") || m.ClientPort == 0 ||
				(m.Name != "www.lbdns.example." && m.Name != "nope.lbdns.example.") || m.QType != dns.TypeA || m.Time.IsZero() || m.Version == "" {
				t.Errorf("decoded %+v", m)
			}
			if m.Type == ClientResponse {
				want := dns.RcodeSuccess
				if m.Name == "nope.lbdns.example." {
					want = dns.RcodeNameError
				}
				if m.Rcode != want {
					t.Errorf("rcode %d, want %d", m.Rcode, want)
				}
			}
		})
	}
}
