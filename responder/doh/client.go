package doh

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
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

// The fronts a request comes over (Request.Via).
const (
	// ViaDoH: DNS over HTTPS.
	ViaDoH = "doh"
	// ViaJSON: the JSON API.
	ViaJSON = "json"
	// ViaDoT: DNS over TLS.
	ViaDoT = "dot"
)

// Request is what a front knows of a request when it says where the
// request's client is.
type Request struct {
	// Via is the front: ViaDoH, ViaJSON or ViaDoT.
	Via string
	// Peer is the connection's source address.
	Peer netip.Addr
	// ProxySource is the source address of the PROXY v2 header sent
	// first on the connection (invalid: none, or one without an
	// address, such as a LOCAL health check's).
	ProxySource netip.Addr
	// ForwardedFor are the request's X-Forwarded-For header values
	// (DoH and the JSON API; DoT has none).
	ForwardedFor []string
	// IP is the JSON API's ip= (invalid: none).
	IP netip.Addr
	// ECS says the request carries a Client Subnet: a DoH or DoT
	// message's option, the JSON API's edns_client_subnet=.
	ECS bool
}

// Located is where a front locates the client of a Request, and why.
type Located struct {
	// Client is the address the query is answered for; From where it
	// came from (FromConnection, FromProxy, FromForwarded, FromParam).
	Client netip.Addr
	From   string
	// Why says it in one line for people: "X-Forwarded-For 203.0.113.7
	// (peer 10.0.0.5 is a trusted proxy)".
	Why string
	// ECS says the request's Client Subnet counts (false: it has none,
	// or the front drops it).
	ECS bool
	// Refused, when set, says why the front answers no query of the
	// request: Status is then the HTTP status of the JSON API's answer
	// (403), or 0 when the connection itself fails.
	Refused string
	Status  int
}

// ReadsProxy reports whether a front reads a PROXY v2 header on a
// connection from peer: proxy_protocol on, peer a trusted proxy. A
// header on any other connection makes its TLS handshake fail.
func (t Trust) ReadsProxy(proxy bool, peer netip.Addr) bool {
	return proxy && t.Trusted(peer)
}

// Locate says where a front, with proxy the proxy_protocol setting,
// locates the client of r: the one rule of DoH, the JSON API and DoT
// (their handlers call it) and of lbctl gslb explain.
//
// The client is the connection's address. A PROXY v2 header counts when
// the front reads it (ReadsProxy); sent to a front that does not, the
// connection fails. X-Forwarded-For counts only when the address so far
// (the connection's or the PROXY header's) is a trusted proxy: its
// addresses are read from the last, each trusted proxy's skipped, and
// the first other one is the client (one that does not parse ends the
// walk at the proxy before it). The JSON API's ip= and
// edns_client_subnet= need allow_client_ip (else the request is refused,
// 403); a DoH message's Client Subnet counts only with allow_client_ip
// (else it is dropped); a DoT message's always counts, as over TCP.
func (t Trust) Locate(proxy bool, r Request) Located {
	peer := r.Peer.Unmap()
	l := Located{Client: peer, From: FromConnection, Why: "connection " + peer.String()}
	trusted := func(a netip.Addr) string {
		if t.Trusted(a) {
			return a.String() + " is a trusted proxy"
		}
		return a.String() + " not in trusted_proxies"
	}
	var notes []string
	if src := r.ProxySource.Unmap(); src.IsValid() {
		if !t.ReadsProxy(proxy, peer) {
			why := "proxy_protocol is off"
			if proxy {
				why = "peer " + trusted(peer)
			}
			l.Refused = "PROXY header refused: " + why + " (the connection fails: its TLS handshake reads the header)"
			return l
		}
		l.Client, l.From = src, FromProxy
		l.Why = "PROXY v2 header " + src.String() + " (peer " + trusted(peer) + ")"
	}
	if len(r.ForwardedFor) > 0 && r.Via != ViaDoT {
		by := "peer"
		if l.From == FromProxy {
			by = "the PROXY header's source"
		}
		switch client, moved, stop := t.forwarded(l.Client, r.ForwardedFor); {
		case !t.Trusted(l.Client):
			notes = append(notes, "X-Forwarded-For ignored: "+by+" "+l.Client.String()+" not in trusted_proxies")
		case !moved:
			notes = append(notes, "X-Forwarded-For ignored: its last address "+strconv.Quote(stop)+" is not an IP address")
		default:
			l.Why = "X-Forwarded-For " + client.String() + " (" + by + " " + trusted(l.Client) + ")"
			if stop != "" {
				l.Why += "; the walk stopped at " + strconv.Quote(stop) + ", not an IP address"
			}
			l.Client, l.From = client, FromForwarded
		}
	}
	if r.Via == ViaJSON {
		for _, p := range []struct {
			given bool
			name  string
		}{{r.IP.IsValid(), "ip="}, {r.ECS, "edns_client_subnet="}} {
			if p.given && !t.AllowClientIP {
				l.Refused, l.Status = p.name+" refused: allow_client_ip is off", http.StatusForbidden
				return l
			}
		}
		if r.IP.IsValid() {
			l.Client, l.From, notes = r.IP.Unmap(), FromParam, nil
			l.Why = "ip= " + l.Client.String() + " (allow_client_ip is on)"
		}
	}
	switch {
	case !r.ECS:
	case r.Via == ViaDoT || t.AllowClientIP:
		l.ECS = true
	default:
		notes = append(notes, "the message's Client Subnet dropped: allow_client_ip is off")
	}
	if len(notes) > 0 {
		l.Why += " (" + strings.Join(notes, "; ") + ")"
	}
	return l
}

// forwarded walks the X-Forwarded-For values xff of a request from
// client, a trusted proxy: their addresses from the last, each trusted
// proxy's skipped; it returns the first other one, whether the walk
// moved (false: the last does not parse, client is returned), and the
// value that ended the walk when one did not parse ("" when none).
func (t Trust) forwarded(client netip.Addr, xff []string) (netip.Addr, bool, string) {
	moved := false
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			s := strings.TrimSpace(parts[j])
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return client, moved, s
			}
			client, moved = a.Unmap(), true
			if !t.Trusted(client) {
				return client, true, ""
			}
		}
	}
	return client, moved, ""
}

// Wrap returns c ready to serve: when its peer is a trusted proxy and
// proxy is set, a connection whose PROXY v2 header (optional) is read,
// within timeout, on its first Read or RemoteAddr (bad hears one that
// could not be read: the connection then fails); else c itself.
func (t Trust) Wrap(c net.Conn, proxy bool, timeout time.Duration, bad func(error)) net.Conn {
	if !t.ReadsProxy(proxy, addrOf(c.RemoteAddr())) {
		return c
	}
	return &proxyConn{Conn: c, timeout: timeout, bad: bad}
}

// Origin returns the connection's own source address of c (the peer)
// and the source its PROXY header gave (invalid: none read), reading the
// header first.
func Origin(c net.Conn) (peer, proxySource netip.Addr) {
	for c != nil {
		if p, ok := c.(*proxyConn); ok {
			p.header()
			peer = addrOf(p.Conn.RemoteAddr())
			if p.proxied {
				proxySource = addrOf(p.remote)
			}
			return peer, proxySource
		}
		switch u := c.(type) {
		case interface{ NetConn() net.Conn }:
			c = u.NetConn()
		case interface{ Unwrap() net.Conn }:
			c = u.Unwrap()
		default:
			return addrOf(c.RemoteAddr()), netip.Addr{}
		}
	}
	return netip.Addr{}, netip.Addr{}
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
