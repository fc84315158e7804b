package doh

import (
	"net"
	"net/netip"
	"strings"
	"time"
)

// Where a client's address came from (Located.From, the JSON API's
// location, lbctl gslb explain).
const (
	// FromConnection: the connection's own address.
	FromConnection = "connection"
	// FromProxy: the PROXY protocol header of a trusted proxy.
	FromProxy = "proxy"
	// FromForwarded: X-Forwarded-For, past the trusted proxies.
	FromForwarded = "x-forwarded-for"
	// FromParam: the JSON API's ip= parameter (allow_client_ip).
	FromParam = "ip"
)

// Trust says which clients may say where their clients are.
type Trust struct {
	// Proxies are the networks of the proxies whose X-Forwarded-For and
	// PROXY header are believed.
	Proxies []netip.Prefix
	// AllowClientIP lets a request name its client: the JSON API's ip=
	// and edns_client_subnet=, the Client Subnet option of a DoH
	// message.
	AllowClientIP bool
}

// Trusted reports whether a is a trusted proxy's address.
func (t Trust) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.Proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the address of the client of a request that came over
// a connection from peer (the PROXY header's source already applied:
// proxied says so) with the X-Forwarded-For header values xff, and where
// it came from. X-Forwarded-For counts only when the connection's peer
// is a trusted proxy: its addresses are read from the last, each trusted
// proxy's skipped, and the first other one is the client (one that does
// not parse ends the walk at the proxy before it).
func (t Trust) Client(peer netip.Addr, proxied bool, xff []string) (netip.Addr, string) {
	peer = peer.Unmap()
	from := FromConnection
	if proxied {
		from = FromProxy
	}
	if len(xff) == 0 || !t.Trusted(peer) {
		return peer, from
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil || a.Zone() != "" {
				return client, from
			}
			client, from = a.Unmap(), FromForwarded
			if !t.Trusted(client) {
				return client, from
			}
		}
	}
	return client, from
}

// Wrap returns c ready to serve: when its peer is a trusted proxy and
// proxy is set, a connection whose PROXY v2 header (optional) is read,
// within timeout, on its first Read or RemoteAddr (bad hears one that
// could not be read: the connection then fails); else c itself.
func (t Trust) Wrap(c net.Conn, proxy bool, timeout time.Duration, bad func(error)) net.Conn {
	if !proxy || !t.Trusted(addrOf(c.RemoteAddr())) {
		return c
	}
	return &proxyConn{Conn: c, timeout: timeout, bad: bad}
}

// Proxied reports whether c's address came from a PROXY header.
func Proxied(c net.Conn) bool {
	p, ok := c.(*proxyConn)
	if !ok {
		return false
	}
	p.header()
	return p.proxied
}

// addrOf is the IP address of a (unmapped; invalid when a has none).
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// AddrOf is the IP address of a net.Addr (unmapped; invalid when it has
// none).
func AddrOf(a net.Addr) netip.Addr { return addrOf(a) }
