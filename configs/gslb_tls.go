package configs

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// GSLBTLS is the GSLB responder's encrypted fronts ([gslb.tls]): DNS
// over HTTPS (RFC 8484) and the HTTPDNS JSON API on doh_listen, DNS
// over TLS (RFC 7858) on dot_listen, one certificate for both. They
// answer through the responder's own answer path, so they need
// [gslb.server] listen too.
type GSLBTLS struct {
	// DoHListen are the addresses of DNS over HTTPS and the JSON API
	// (HTTP/2 and HTTP/1.1 over TLS), "ADDR:PORT". Default none.
	DoHListen []string `toml:"doh_listen"`
	// DoTListen are the addresses of DNS over TLS, "ADDR:PORT".
	// Default none.
	DoTListen []string `toml:"dot_listen"`
	// CertFile and KeyFile are the PEM certificate chain and private
	// key the fronts present; required with a listen address. They are
	// read again when they change (checked at most every
	// CertCheckInterval, on a handshake), without a restart; a pair
	// that does not load leaves the last one serving.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// CertCheckInterval is how often, at most, a handshake looks
	// whether the certificate or key file changed, 1s..1h. Default 5s.
	CertCheckInterval Duration `toml:"cert_check_interval"`
	// DoHPath is the URL path of DNS over HTTPS. Default "/dns-query".
	DoHPath string `toml:"doh_path"`
	// JSONPath is the URL path of the JSON API; "" switches it off.
	// Default "/resolve".
	JSONPath string `toml:"json_path"`
	// JSONSecret, when set, is the shared secret every JSON API request
	// must be signed with (an expiry and an HMAC-SHA256 in the URL).
	// Default "" (unsigned requests are answered).
	JSONSecret string `toml:"json_secret"`
	// AllowClientIP lets a request say where its client is: the JSON
	// API's ip= and edns_client_subnet= parameters, and the Client
	// Subnet option inside a DoH message (dropped otherwise). Default
	// false.
	AllowClientIP bool `toml:"allow_client_ip"`
	// TrustedProxies are the networks (CIDR) of the proxies whose
	// X-Forwarded-For (DoH, JSON API) and PROXY protocol v2 header are
	// believed. Default none.
	TrustedProxies []string `toml:"trusted_proxies"`
	// ProxyProtocol makes every listener of the fronts expect a PROXY
	// protocol v2 header from a connection of a trusted proxy
	// (optional: a connection without one is served as it is); a
	// connection from elsewhere that sends one is closed. Default false.
	ProxyProtocol bool `toml:"proxy_protocol"`
	// MaxConnections is the most connections open at once on the DoH
	// listeners together, and on the DoT listeners together,
	// 1..1048576. Default 1024.
	MaxConnections int `toml:"max_connections"`
	// MaxPerSource is the most connections open at once from one
	// client (an IPv4 address, an IPv6 /64) on each front,
	// 1..MaxConnections. Default 64.
	MaxPerSource int `toml:"max_per_source"`
	// HandshakeTimeout bounds the TLS handshake (and the PROXY header),
	// and the reading of an HTTP request's header, 100ms..1m. Default
	// 5s.
	HandshakeTimeout Duration `toml:"handshake_timeout"`
	// IdleTimeout closes a connection idle that long (no request, or no
	// answer written over DoT), 1s..1h. Default 30s.
	IdleTimeout Duration `toml:"idle_timeout"`
	// RequestTimeout bounds reading one HTTP request's body and
	// writing its response, 100ms..1m. Default 5s.
	RequestTimeout Duration `toml:"request_timeout"`
	// MaxMessageSize is the largest DNS message a DoH request may carry
	// (larger: 413), 512..65535. Default 65535.
	MaxMessageSize int `toml:"max_message_size"`
	// MaxStreams is HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, 1..1000.
	// Default 100.
	MaxStreams int `toml:"max_streams"`
	// MaxBatch is how many names one JSON API request may ask,
	// 1..100. Default 16.
	MaxBatch int `toml:"max_batch"`

	// DoHAddrs and DoTAddrs are the listen addresses parsed, and
	// Proxies TrustedProxies (set by Load).
	DoHAddrs []netip.AddrPort `toml:"-"`
	DoTAddrs []netip.AddrPort `toml:"-"`
	Proxies  []netip.Prefix   `toml:"-"`
}

// On reports whether a front of t listens.
func (t *GSLBTLS) On() bool { return len(t.DoHAddrs) > 0 || len(t.DoTAddrs) > 0 }

// Defaults and limits of [gslb.tls].
const (
	DefaultGSLBTLSCertCheck      = 5 * time.Second
	DefaultGSLBDoHPath           = "/dns-query"
	DefaultGSLBJSONPath          = "/resolve"
	DefaultGSLBTLSMaxConnections = 1024
	DefaultGSLBTLSMaxPerSource   = 64
	DefaultGSLBTLSHandshake      = 5 * time.Second
	DefaultGSLBTLSIdleTimeout    = 30 * time.Second
	DefaultGSLBTLSRequestTimeout = 5 * time.Second
	DefaultGSLBTLSMaxMessageSize = 65535
	MinGSLBTLSMaxMessageSize     = 512
	DefaultGSLBTLSMaxStreams     = 100
	MaxGSLBTLSMaxStreams         = 1000
	DefaultGSLBTLSMaxBatch       = 16
	MaxGSLBTLSMaxBatch           = 100
	MaxGSLBTLSMaxConnections     = 1 << 20
	MinGSLBJSONSecret            = 16
)

// validateGSLBTLS applies the defaults of [gslb.tls] and checks it;
// first holds the TCP ports [gslb.server] listen took (by index), so
// that a front cannot take one of them.
func (d *decoder) validateGSLBTLS(first map[netip.AddrPort]string) {
	t := &d.cfg.GSLB.TLS
	raw, present := d.gslbRaw["tls"].(map[string]any)
	base := "gslb.tls"
	if !hasKey(raw, "cert_check_interval") {
		t.CertCheckInterval.Duration = DefaultGSLBTLSCertCheck
	}
	if !hasKey(raw, "doh_path") {
		t.DoHPath = DefaultGSLBDoHPath
	}
	if !hasKey(raw, "json_path") {
		t.JSONPath = DefaultGSLBJSONPath
	}
	if !hasKey(raw, "max_connections") {
		t.MaxConnections = DefaultGSLBTLSMaxConnections
	}
	if !hasKey(raw, "max_per_source") {
		t.MaxPerSource = min(DefaultGSLBTLSMaxPerSource, max(t.MaxConnections, 1))
	}
	if !hasKey(raw, "handshake_timeout") {
		t.HandshakeTimeout.Duration = DefaultGSLBTLSHandshake
	}
	if !hasKey(raw, "idle_timeout") {
		t.IdleTimeout.Duration = DefaultGSLBTLSIdleTimeout
	}
	if !hasKey(raw, "request_timeout") {
		t.RequestTimeout.Duration = DefaultGSLBTLSRequestTimeout
	}
	if !hasKey(raw, "max_message_size") {
		t.MaxMessageSize = DefaultGSLBTLSMaxMessageSize
	}
	if !hasKey(raw, "max_streams") {
		t.MaxStreams = DefaultGSLBTLSMaxStreams
	}
	if !hasKey(raw, "max_batch") {
		t.MaxBatch = DefaultGSLBTLSMaxBatch
	}
	t.DoHAddrs = d.listenAddrs(joinKey(base, "doh_listen"), t.DoHListen, first)
	t.DoTAddrs = d.listenAddrs(joinKey(base, "dot_listen"), t.DoTListen, first)
	if !present {
		return
	}
	on := len(t.DoHListen) > 0 || len(t.DoTListen) > 0
	if on && len(d.cfg.GSLB.Server.Listen) == 0 {
		key := joinKey(base, "doh_listen")
		if len(t.DoHListen) == 0 {
			key = joinKey(base, "dot_listen")
		}
		d.p.add(key, strings.Join(append(append([]string{}, t.DoHListen...), t.DoTListen...), " "),
			"needs gslb.server.listen: the encrypted fronts answer through the responder, which is off without it")
	}
	for _, k := range []struct{ key, val string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
		switch {
		case k.val == "" && on:
			d.p.add(joinKey(base, k.key), "", "missing: doh_listen and dot_listen need a certificate and its key (PEM files)")
		case k.val != "" && !filepath.IsAbs(k.val):
			d.p.add(joinKey(base, k.key), k.val, "must be an absolute path")
		}
	}
	if v := t.CertCheckInterval.Duration; v < time.Second || v > time.Hour {
		d.p.add(joinKey(base, "cert_check_interval"), fmtDur(v), "must be between 1s and 1h")
	}
	paths := map[string]string{}
	for _, k := range []struct {
		key, val string
		off      bool
	}{{"doh_path", t.DoHPath, false}, {"json_path", t.JSONPath, true}} {
		switch {
		case k.val == "" && k.off:
		case !strings.HasPrefix(k.val, "/") || strings.ContainsAny(k.val, "?# \t"):
			d.p.add(joinKey(base, k.key), k.val, `must be a URL path starting with "/" (no query, no spaces)`)
		case paths[k.val] != "":
			d.p.add(joinKey(base, k.key), k.val, "is also "+joinKey(base, paths[k.val]))
		default:
			paths[k.val] = k.key
		}
	}
	if s := t.JSONSecret; s != "" && len(s) < MinGSLBJSONSecret {
		d.p.add(joinKey(base, "json_secret"), strings.Repeat("*", len(s)), fmt.Sprintf("too short: at least %d characters", MinGSLBJSONSecret))
	}
	t.Proxies = nil
	for i, s := range t.TrustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		if err != nil || p.Addr().Zone() != "" {
			d.p.add(indexKey(joinKey(base, "trusted_proxies"), i), s, `not a network ("192.0.2.0/24", "2001:db8::/64") or an address`)
			continue
		}
		if p.Addr().Is4In6() { // ::ffff:192.0.2.0/120 is 192.0.2.0/24
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		t.Proxies = append(t.Proxies, p.Masked())
	}
	if t.ProxyProtocol && len(t.TrustedProxies) == 0 {
		d.p.add(joinKey(base, "proxy_protocol"), "true", "needs trusted_proxies: a PROXY header is believed only from them")
	}
	between := func(key string, v, lo, hi int, hiName string) {
		if v < lo || v > hi {
			d.p.add(joinKey(base, key), strconv.Itoa(v), fmt.Sprintf("must be between %d and %s", lo, hiName))
		}
	}
	between("max_connections", t.MaxConnections, 1, MaxGSLBTLSMaxConnections, strconv.Itoa(MaxGSLBTLSMaxConnections))
	if t.MaxConnections >= 1 && t.MaxConnections <= MaxGSLBTLSMaxConnections {
		between("max_per_source", t.MaxPerSource, 1, t.MaxConnections, fmt.Sprintf("max_connections (%d)", t.MaxConnections))
	} else {
		between("max_per_source", t.MaxPerSource, 1, MaxGSLBTLSMaxConnections, strconv.Itoa(MaxGSLBTLSMaxConnections))
	}
	durBetween := func(key string, v, lo, hi time.Duration) {
		if v < lo || v > hi {
			d.p.add(joinKey(base, key), fmtDur(v), "must be between "+fmtDur(lo)+" and "+fmtDur(hi))
		}
	}
	durBetween("handshake_timeout", t.HandshakeTimeout.Duration, 100*time.Millisecond, time.Minute)
	durBetween("idle_timeout", t.IdleTimeout.Duration, time.Second, time.Hour)
	durBetween("request_timeout", t.RequestTimeout.Duration, 100*time.Millisecond, time.Minute)
	between("max_message_size", t.MaxMessageSize, MinGSLBTLSMaxMessageSize, 65535, "65535")
	between("max_streams", t.MaxStreams, 1, MaxGSLBTLSMaxStreams, strconv.Itoa(MaxGSLBTLSMaxStreams))
	between("max_batch", t.MaxBatch, 1, MaxGSLBTLSMaxBatch, strconv.Itoa(MaxGSLBTLSMaxBatch))
}

// listenAddrs parses the "ADDR:PORT" list at key, each unmapped; first
// holds the addresses already taken (by any list, port 0 aside) with the
// key that took them, and gets this list's.
func (d *decoder) listenAddrs(key string, list []string, first map[netip.AddrPort]string) []netip.AddrPort {
	var out []netip.AddrPort
	for i, l := range list {
		k := indexKey(key, i)
		ap, err := netip.ParseAddrPort(l)
		switch {
		case err != nil:
			d.p.add(k, l, `not an "ADDR:PORT" address (IPv6 in brackets: "[2001:db8::53]:53")`)
			continue
		case ap.Addr().Zone() != "":
			d.p.add(k, l, "an address with a zone cannot be used")
			continue
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if other, dup := first[ap]; dup && ap.Port() != 0 {
			d.p.add(k, l, fmt.Sprintf("listed twice (also %s)", other))
			continue
		}
		first[ap] = k
		out = append(out, ap)
	}
	return out
}
