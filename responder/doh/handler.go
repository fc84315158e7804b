package doh

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"lbdns/gslb"
)

// Answerer is the responder's one answer path, as the fronts use it.
type Answerer interface {
	// Exchange answers the DNS message query from client as over TCP
	// (the whole reply, never truncated), counts it as the responder's
	// queries are counted (metrics, flood alarms, with client), and
	// returns the reply, packed into dst when it fits; nil when query
	// gets none (a response, shorter than a header). query may be
	// changed.
	Exchange(dst, query []byte, client netip.Addr) []byte
	// Locate is the location of addr in the topology answered from now.
	Locate(addr netip.Addr) gslb.Location
}

// The media types of the fronts.
const (
	// MediaDNSMessage is DoH's (RFC 8484 section 6).
	MediaDNSMessage = "application/dns-message"
	// MediaDNSJSON is the JSON API's (Cloudflare's name for the shape).
	MediaDNSJSON = "application/dns-json"
)

// The front label values of the metrics.
const (
	frontDoH  = "doh"
	frontJSON = "json"
	frontDoT  = "dot"
)

// HandlerOptions configure the HTTP handler of DoH and the JSON API.
type HandlerOptions struct {
	// DoHPath is the URL path of DNS over HTTPS. Default "/dns-query".
	DoHPath string
	// JSONPath is the URL path of the JSON API; "" switches it off.
	JSONPath string
	// JSONSecret, when set, is the key every JSON API request must be
	// signed with (see VerifySigned).
	JSONSecret []byte
	// Trust says whose word on the client's address counts.
	Trust Trust
	// ProxyProtocol says the listeners read a PROXY v2 header from the
	// trusted proxies (Trust.Locate; Server sets it).
	ProxyProtocol bool
	// MaxMessageSize is the largest DNS message of a DoH request (413
	// beyond). Default 65535.
	MaxMessageSize int
	// MaxBatch is how many questions (names times types) one JSON API
	// request may ask. Default 16.
	MaxBatch int
	// Metrics, when set, counts the requests.
	Metrics *Metrics
	// Logger receives the handler's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock (signatures' expiry). Default time.Now.
	Now func() time.Time
}

// withDefaults returns o with its zero fields set.
func (o HandlerOptions) withDefaults() HandlerOptions {
	if o.DoHPath == "" {
		o.DoHPath = "/dns-query"
	}
	if o.MaxMessageSize <= 0 || o.MaxMessageSize > 65535 {
		o.MaxMessageSize = 65535
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 16
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// handler serves DoH and the JSON API.
type handler struct {
	o   HandlerOptions
	ans Answerer
}

// NewHandler returns the handler of DoH (o.DoHPath) and the JSON API
// (o.JSONPath) answering through ans; other paths are 404. The client is
// where Trust.Locate says: the connection's address, or what a trusted
// proxy or an allowed ip= says.
func NewHandler(o HandlerOptions, ans Answerer) http.Handler {
	return &handler{o: o.withDefaults(), ans: ans}
}

// connKey is the context key of a request's connection (ConnContext).
type connKey struct{}

// withConn stores c in ctx (http.Server.ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// origin returns the request's connection's own address (the peer)
// and the source its PROXY header gave (invalid: none), from the
// connection (ConnContext), else from RemoteAddr.
func origin(r *http.Request) (peer, proxySource netip.Addr) {
	if c, _ := r.Context().Value(connKey{}).(net.Conn); c != nil {
		return Origin(c)
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap.Addr()
	}
	return peer, netip.Addr{}
}

// ServeHTTP dispatches by path.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == h.o.DoHPath:
		h.count(frontDoH, h.serveDoH(w, r))
	case h.o.JSONPath != "" && r.URL.Path == h.o.JSONPath:
		h.count(frontJSON, h.serveJSON(w, r))
	default:
		http.Error(w, "not found: DNS over HTTPS is at "+h.o.DoHPath, http.StatusNotFound)
		h.count("other", http.StatusNotFound)
	}
}

// count counts one request of front answered code.
func (h *handler) count(front string, code int) {
	if h.o.Metrics != nil {
		h.o.Metrics.request(front, code)
	}
}

// locate is where the request r to front via is located (Trust.Locate),
// with its ip= and whether it carries a Client Subnet.
func (h *handler) locate(r *http.Request, via string, ip netip.Addr, ecs bool) Located {
	peer, src := origin(r)
	return h.o.Trust.Locate(h.o.ProxyProtocol, Request{Via: via, Peer: peer, ProxySource: src,
		ForwardedFor: r.Header.Values("X-Forwarded-For"), IP: ip, ECS: ecs})
}

// fail writes a plain-text error with code and returns code.
func fail(w http.ResponseWriter, code int, msg string) int {
	http.Error(w, msg, code)
	return code
}

// serveDoH answers one DoH request (RFC 8484 section 4.1) and returns
// its status.
func (h *handler) serveDoH(w http.ResponseWriter, r *http.Request) int {
	msg, code, why := h.dohMessage(r)
	if code != 0 {
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, POST")
		}
		return fail(w, code, why)
	}
	if len(msg) < headerSize {
		return fail(w, http.StatusBadRequest, "not a DNS message: shorter than its 12-octet header")
	}
	if msg[2]&0x80 != 0 {
		return fail(w, http.StatusBadRequest, "not a DNS query: the QR bit is set")
	}
	loc := h.locate(r, ViaDoH, netip.Addr{}, true) // whatever option msg carries
	if !loc.ECS {
		msg = StripECS(msg)
	}
	reply := h.ans.Exchange(nil, msg, loc.Client)
	if len(reply) < headerSize {
		return fail(w, http.StatusBadRequest, "not a DNS query")
	}
	if reply[3]&0xF == 1 && binary.BigEndian.Uint16(reply[4:]) == 0 { // FORMERR without the question: it could not be read
		return fail(w, http.StatusBadRequest, "malformed DNS message: its question cannot be read")
	}
	hd := w.Header()
	hd.Set("Content-Type", MediaDNSMessage)
	hd.Set("Content-Length", strconv.Itoa(len(reply)))
	hd.Set("Cache-Control", cacheControl(reply))
	w.WriteHeader(http.StatusOK)
	w.Write(reply)
	return http.StatusOK
}

// cacheControl is the Cache-Control of a reply: max-age its smallest
// TTL (0 without records).
func cacheControl(reply []byte) string {
	ttl, _ := MinTTL(reply)
	return "max-age=" + strconv.FormatUint(uint64(ttl), 10)
}

// dohMessage reads the DNS message of a DoH request: GET's dns
// parameter (base64url, padding tolerated) or POST's body; else the
// status and why.
func (h *handler) dohMessage(r *http.Request) ([]byte, int, string) {
	max := h.o.MaxMessageSize
	switch r.Method {
	case http.MethodGet:
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return nil, http.StatusBadRequest, "bad query string: " + err.Error()
		}
		v := q["dns"]
		if len(v) == 0 || v[0] == "" {
			return nil, http.StatusBadRequest, "missing the dns parameter (the DNS message, base64url)"
		}
		enc := strings.TrimRight(v[0], "=")
		if base64.RawURLEncoding.DecodedLen(len(enc)) > max {
			return nil, http.StatusRequestEntityTooLarge, "DNS message too large: at most " + strconv.Itoa(max) + " octets"
		}
		msg, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return nil, http.StatusBadRequest, "the dns parameter is not base64url: " + err.Error()
		}
		return msg, 0, ""
	case http.MethodPost:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != MediaDNSMessage {
			return nil, http.StatusUnsupportedMediaType, "Content-Type must be " + MediaDNSMessage
		}
		if r.ContentLength > int64(max) {
			return nil, http.StatusRequestEntityTooLarge, "DNS message too large: at most " + strconv.Itoa(max) + " octets"
		}
		msg, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
		if err != nil {
			return nil, http.StatusBadRequest, "cannot read the request body: " + err.Error()
		}
		if len(msg) > max {
			return nil, http.StatusRequestEntityTooLarge, "DNS message too large: at most " + strconv.Itoa(max) + " octets"
		}
		return msg, 0, ""
	}
	return nil, http.StatusMethodNotAllowed, "method " + r.Method + " not allowed: GET or POST"
}
