package healthbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

// VersionText is the responder's answer to CHAOS TXT version.bind.
const VersionText = "lbdns-bench-responder"

// Responder answers DNS over UDP on many ports of one loopback address:
// NXDOMAIN for every IN query (what a healthy resolver answers for the
// benchmark's random probe labels), VersionText for CHAOS TXT
// version.bind, REFUSED for anything else.
type Responder struct {
	conns   []*net.UDPConn
	wg      sync.WaitGroup
	queries atomic.Int64
}

// Listen binds one UDP socket on addr for every port in [lo, hi] that is not
// in skip, and starts answering on each. addr must be a loopback address.
func Listen(addr netip.Addr, lo, hi uint16, skip map[uint16]bool) (*Responder, error) {
	if !addr.IsLoopback() {
		return nil, fmt.Errorf("healthbench: %s is not a loopback address", addr)
	}
	if lo == 0 || hi < lo {
		return nil, fmt.Errorf("healthbench: empty or zero port range %d-%d", lo, hi)
	}
	r := &Responder{}
	for p := int(lo); p <= int(hi); p++ {
		if skip[uint16(p)] {
			continue
		}
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(p))))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("healthbench: listen %s port %d: %w", addr, p, err)
		}
		r.conns = append(r.conns, c)
	}
	for _, c := range r.conns {
		r.wg.Go(func() { serve(c, &r.queries) })
	}
	return r, nil
}

// Len returns the number of sockets the responder serves.
func (r *Responder) Len() int { return len(r.conns) }

// Queries returns the number of datagrams received so far on all sockets.
func (r *Responder) Queries() int64 { return r.queries.Load() }

// Close closes every socket and waits for the serving goroutines to end.
func (r *Responder) Close() {
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.wg.Wait()
}

// serve answers queries on c until c is closed, counting each in count.
func serve(c *net.UDPConn, count *atomic.Int64) {
	buf := make([]byte, 1500)
	out := make([]byte, 0, 1500)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		count.Add(1)
		if reply := Answer(buf[:n], out[:0]); reply != nil {
			_, _ = c.WriteToUDPAddrPort(reply, from)
		}
	}
}

// Answer appends the reply to query to out and returns it; nil means no
// reply (not a query, or unparsable). An IN query with one question is
// answered NXDOMAIN with the question echoed, without parsing more than the
// question; anything else goes through miekg/dns.
func Answer(query, out []byte) []byte {
	if len(query) < 12 || query[2]&0x80 != 0 {
		return nil
	}
	end, qclass, ok := questionEnd(query)
	if ok && qclass == dns.ClassINET && query[2]&0x78 == 0 {
		out = append(out, query[:end]...)
		out[2] = 0x80 | query[2]&0x01 // QR, opcode QUERY, RD copied
		out[3] = 0x80 | dns.RcodeNameError
		binary.BigEndian.PutUint16(out[4:], 1)
		clear(out[6:12])
		return out
	}
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil || len(q.Question) != 1 {
		return nil
	}
	r := new(dns.Msg)
	r.SetReply(q)
	qq := q.Question[0]
	if qq.Qclass == dns.ClassCHAOS && qq.Qtype == dns.TypeTXT && strings.EqualFold(qq.Name, "version.bind.") {
		r.Answer = []dns.RR{&dns.TXT{
			Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS},
			Txt: []string{VersionText},
		}}
	} else {
		r.Rcode = dns.RcodeRefused
	}
	wire, err := r.Pack()
	if err != nil {
		return nil
	}
	return append(out, wire...)
}

// questionEnd returns the offset just past the single question of query and
// its class; ok is false unless query has exactly one uncompressed question.
func questionEnd(query []byte) (end int, qclass uint16, ok bool) {
	if binary.BigEndian.Uint16(query[4:]) != 1 {
		return 0, 0, false
	}
	i := 12
	for {
		if i >= len(query) {
			return 0, 0, false
		}
		l := int(query[i])
		if l == 0 {
			i++
			break
		}
		if l&0xC0 != 0 {
			return 0, 0, false
		}
		i += 1 + l
	}
	if i+4 > len(query) {
		return 0, 0, false
	}
	return i + 4, binary.BigEndian.Uint16(query[i+2:]), true
}
