package responder

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// seeds are queries of the tests, packed: the fuzzer's starting points
// beside the corpus in testdata/fuzz/FuzzServe.
func seeds() [][]byte {
	badvers := query("www."+zone, dns.TypeA, 1232)
	badvers.IsEdns0().SetVersion(1)
	notify := query(zone, dns.TypeSOA, 0)
	notify.Opcode = dns.OpcodeNotify
	two := query("www."+zone, dns.TypeA, 0)
	two.Question = append(two.Question, two.Question[0])
	msgs := []*dns.Msg{
		query("www."+zone, dns.TypeA, 0),
		query("WwW.ExAmPlE.TeSt.", dns.TypeAAAA, 4096),
		query("big."+zone, dns.TypeA, 0),
		query("nope."+zone, dns.TypeMX, 1232),
		query("example.com.", dns.TypeA, 0),
		withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2}),
		withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0x02}),
		withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 1, 23, 0, 192, 0, 3}),
		withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 0, 0, 0}),
		badvers, notify, two,
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzServe feeds bytes to the query path as the server reads them (the
// reader's ECS marking, miekg/dns's unpacking, Respond) over UDP and TCP:
// it must not panic, and a reply must pack, parse back, answer the
// query's ID and fit the client's UDP size.
func FuzzServe(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	s := &Server{}
	s.Swap(&fake{Scope: 16, Big: 100})
	src := netip.MustParseAddr("192.0.2.1")
	f.Fuzz(func(t *testing.T, b []byte) {
		b = slices.Clone(b)
		markECS(b)
		if len(b) < 12 {
			return // miekg/dns answers nothing
		}
		h := dns.Header{Id: binary.BigEndian.Uint16(b), Bits: binary.BigEndian.Uint16(b[2:])}
		if accept(h) == dns.MsgIgnore {
			return
		}
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return // miekg/dns answers FORMERR itself
		}
		for _, tcp := range []bool{false, true} {
			resp := s.Respond(req, src, tcp)
			if resp == nil {
				t.Fatalf("no reply to a query (tcp %v)", tcp)
			}
			out, err := resp.Pack()
			if err != nil {
				t.Fatalf("reply does not pack (tcp %v): %v\n%v", tcp, err, resp)
			}
			var back dns.Msg
			if err := back.Unpack(out); err != nil {
				t.Fatalf("reply does not parse (tcp %v): %v", tcp, err)
			}
			if back.Id != req.Id || !back.Response {
				t.Fatalf("reply id %d qr %v, want id %d qr", back.Id, back.Response, req.Id)
			}
			limit := dns.MinMsgSize
			if opt := req.IsEdns0(); opt != nil {
				limit = min(max(int(opt.UDPSize()), dns.MinMsgSize), DefaultUDPSize)
			}
			if !tcp && len(out) > limit {
				t.Fatalf("udp reply of %d bytes, over %d", len(out), limit)
			}
		}
	})
}
