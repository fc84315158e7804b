package doh

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// proxySig is the signature that opens a PROXY protocol v2 header.
var proxySig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// maxProxyHeader bounds a PROXY v2 header: its 16 octets and what its
// length says (addresses and TLVs).
const maxProxyHeader = 16 + 512

// ErrProxyHeader is a PROXY protocol header that is malformed, of a
// version other than 2, or longer than this server reads.
var ErrProxyHeader = errors.New("doh: bad PROXY protocol header")

// ParseProxyV2 reads the PROXY protocol v2 header at the start of b (the
// HAProxy specification, section 2.2): the source address it carries
// (invalid for a LOCAL command, or an address family other than TCP or
// UDP over IPv4 or IPv6: the connection's own address is the client),
// and the header's length. need > 0 says that b is too short: that many
// octets are needed. A b that does not start with the signature is not a
// header (ErrProxyHeader).
func ParseProxyV2(b []byte) (src netip.AddrPort, n, need int, err error) {
	if len(b) < 16 {
		if !bytes.HasPrefix(proxySig, b[:min(len(b), len(proxySig))]) {
			return src, 0, 0, fmt.Errorf("%w: no signature", ErrProxyHeader)
		}
		return src, 0, 16, nil
	}
	if !bytes.Equal(b[:12], proxySig) {
		return src, 0, 0, fmt.Errorf("%w: no signature", ErrProxyHeader)
	}
	verCmd, fam := b[12], b[13]
	if verCmd>>4 != 2 {
		return src, 0, 0, fmt.Errorf("%w: version %d", ErrProxyHeader, verCmd>>4)
	}
	n = 16 + int(binary.BigEndian.Uint16(b[14:]))
	if n > maxProxyHeader {
		return src, 0, 0, fmt.Errorf("%w: %d octets (at most %d)", ErrProxyHeader, n, maxProxyHeader)
	}
	if len(b) < n {
		return src, 0, n, nil
	}
	switch cmd := verCmd & 0xF; cmd {
	case 0: // LOCAL: the proxy's own connection (a health check)
		return src, n, 0, nil
	case 1: // PROXY
	default:
		return src, 0, 0, fmt.Errorf("%w: command %d", ErrProxyHeader, cmd)
	}
	body := b[16:n]
	switch fam >> 4 {
	case 1: // AF_INET
		if len(body) < 12 {
			return src, 0, 0, fmt.Errorf("%w: IPv4 addresses cut short", ErrProxyHeader)
		}
		a := netip.AddrFrom4([4]byte(body[:4]))
		src = netip.AddrPortFrom(a, binary.BigEndian.Uint16(body[8:]))
	case 2: // AF_INET6
		if len(body) < 36 {
			return src, 0, 0, fmt.Errorf("%w: IPv6 addresses cut short", ErrProxyHeader)
		}
		a := netip.AddrFrom16([16]byte(body[:16])).Unmap()
		src = netip.AddrPortFrom(a, binary.BigEndian.Uint16(body[32:]))
	}
	if p := fam & 0xF; p != 1 && p != 2 { // neither STREAM nor DGRAM
		src = netip.AddrPort{}
	}
	return src, n, 0, nil
}

// AppendProxyV2 appends the PROXY v2 header of a TCP connection from src
// to dst (what a proxy sends; tests and tools).
func AppendProxyV2(b []byte, src, dst netip.AddrPort) []byte {
	b = append(b, proxySig...)
	b = append(b, 0x21)
	s, d := src.Addr(), dst.Addr()
	if s.Is4() && d.Is4() {
		b = append(b, 0x11, 0, 12)
		b = append(b, s.AsSlice()...)
		b = append(b, d.AsSlice()...)
	} else {
		b = append(b, 0x21, 0, 36)
		s16, d16 := s.As16(), d.As16()
		b = append(b, s16[:]...)
		b = append(b, d16[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	return binary.BigEndian.AppendUint16(b, dst.Port())
}

// proxyConn is a connection of a trusted proxy that may open with a
// PROXY v2 header: read (within the deadline) on the first Read or
// RemoteAddr, whichever comes first; its source replaces the
// connection's address. A connection whose first octet is not the
// signature's is served as it is.
type proxyConn struct {
	net.Conn
	timeout time.Duration
	// bad, when set, hears a header that could not be read.
	bad func(error)

	once    sync.Once
	br      *bufio.Reader
	remote  net.Addr
	proxied bool // remote came from the header
	err     error
}

// header reads the PROXY header, once.
func (c *proxyConn) header() {
	c.once.Do(func() {
		c.remote = c.Conn.RemoteAddr()
		c.br = bufio.NewReaderSize(c.Conn, maxProxyHeader)
		c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
		defer c.Conn.SetReadDeadline(time.Time{})
		first, err := c.br.Peek(1)
		if err != nil {
			c.err = err
			return
		}
		if first[0] != proxySig[0] {
			return // no header (a TLS ClientHello starts with 0x16)
		}
		want := 16
		for {
			b, perr := c.br.Peek(want)
			src, n, need, err := ParseProxyV2(b)
			switch {
			case err != nil:
				c.err = err
			case need > 0 && perr != nil:
				c.err = fmt.Errorf("%w: %w", ErrProxyHeader, perr)
			case need > 0:
				want = need
				continue
			default:
				c.br.Discard(n)
				if src.IsValid() {
					c.remote, c.proxied = net.TCPAddrFromAddrPort(src), true
				}
			}
			break
		}
		if c.err != nil && c.bad != nil {
			c.bad(c.err)
		}
	})
}

// Read reads past the PROXY header; a connection whose header was bad
// fails.
func (c *proxyConn) Read(p []byte) (int, error) {
	c.header()
	if c.err != nil {
		return 0, c.err
	}
	return c.br.Read(p)
}

// RemoteAddr is the client's address: the PROXY header's source when it
// carried one, else the connection's.
func (c *proxyConn) RemoteAddr() net.Addr {
	c.header()
	return c.remote
}

// Unwrap returns the connection accepted.
func (c *proxyConn) Unwrap() net.Conn { return c.Conn }

var _ io.Reader = (*proxyConn)(nil)
