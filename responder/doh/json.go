package doh

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// JSONReply is the JSON API's answer to one question: the
// application/dns-json shape of Google's and Cloudflare's resolvers
// (Status, the header flags, Question, Answer, Authority,
// edns_client_subnet), with the location the answer was chosen for.
type JSONReply struct {
	// Status is the DNS response code (0 NOERROR, 2 SERVFAIL, 3
	// NXDOMAIN, 5 REFUSED).
	Status int `json:"Status"`
	// TC, RD, RA, AD and CD are the reply's header flags.
	TC bool `json:"TC"`
	RD bool `json:"RD"`
	RA bool `json:"RA"`
	AD bool `json:"AD"`
	CD bool `json:"CD"`
	// Question is the question asked.
	Question []JSONQuestion `json:"Question"`
	// Answer and Authority are the reply's records (the SOA of a
	// negative answer in Authority); omitted when empty.
	Answer    []JSONRecord `json:"Answer,omitempty"`
	Authority []JSONRecord `json:"Authority,omitempty"`
	// ECS is the Client Subnet the query carried, as the reply echoed
	// it: "ADDRESS/SCOPE" (Google's form); omitted without one.
	ECS string `json:"edns_client_subnet,omitempty"`
	// Location is where the answer was chosen for.
	Location JSONLocation `json:"Location"`
}

// JSONQuestion is a question of a JSONReply.
type JSONQuestion struct {
	Name string `json:"name"`
	Type uint16 `json:"type"`
}

// JSONRecord is a record of a JSONReply: its data in presentation
// format (an address, a name, a TXT's quoted strings).
type JSONRecord struct {
	Name string `json:"name"`
	Type uint16 `json:"type"`
	TTL  uint32 `json:"TTL"`
	Data string `json:"data"`
}

// JSONLocation is the client address an answer was located by and what
// the topology says of it.
type JSONLocation struct {
	// Client is the address located; From where it came from: "ecs"
	// (edns_client_subnet, when the reply's scope says the answer
	// depends on it), "ip" (the ip= parameter), "connection",
	// "x-forwarded-for" or "proxy".
	Client string `json:"client"`
	From   string `json:"from"`
	// Labels are its location labels (empty: the topology has none);
	// Prefix the topology's entry that matched ("" when none).
	Labels map[string]string `json:"labels"`
	Prefix string            `json:"prefix,omitempty"`
}

// jsonError is the body of a JSON API error.
type jsonError struct {
	Error string `json:"error"`
}

// failJSON writes a JSON error with code and returns code.
func failJSON(w http.ResponseWriter, code int, msg string) int {
	w.Header().Set("Content-Type", MediaDNSJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(jsonError{Error: msg})
	return code
}

// jsonQuestion is one question of a JSON API request.
type jsonQuestion struct {
	name  string
	qtype uint16
}

// jsonRequest is a JSON API request, checked.
type jsonRequest struct {
	questions []jsonQuestion
	// ip is the ip= parameter (invalid: none); ecs the
	// edns_client_subnet= one (invalid: none).
	ip  netip.Addr
	ecs netip.Prefix
	cd  bool
}

// parseJSONRequest checks the parameters of a JSON API request: name (a
// domain name; repeated, or a comma-separated list: a batch), type (a
// type's name or number, default A; a comma-separated list asks each
// name each type), ip= and edns_client_subnet= (whether they may be
// given is Trust.Locate's), cd. It returns the status and why for a bad
// one.
func parseJSONRequest(q url.Values, maxBatch int) (jsonRequest, int, string) {
	var req jsonRequest
	var names []string
	for _, v := range q["name"] {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return req, http.StatusBadRequest, "missing the name parameter"
	}
	types := []uint16{dns.TypeA}
	if tv := q.Get("type"); tv != "" {
		types = types[:0]
		for t := range strings.SplitSeq(tv, ",") {
			t = strings.TrimSpace(t)
			qt, ok := dns.StringToType[strings.ToUpper(t)]
			if !ok {
				n, err := strconv.ParseUint(t, 10, 16)
				if err != nil {
					return req, http.StatusBadRequest, "type: not a DNS type: " + t
				}
				qt = uint16(n)
			}
			if qt == dns.TypeOPT || qt == dns.TypeAXFR || qt == dns.TypeIXFR || qt == 0 {
				return req, http.StatusBadRequest, "type: cannot be asked: " + t
			}
			types = append(types, qt)
		}
	}
	if n := len(names) * len(types); n > maxBatch {
		return req, http.StatusBadRequest, fmt.Sprintf("too many questions: %d names times %d types, at most %d", len(names), len(types), maxBatch)
	}
	for _, n := range names {
		if _, ok := dns.IsDomainName(n); !ok || len(dns.Fqdn(n)) > 255 {
			return req, http.StatusBadRequest, "name: not a domain name: " + n
		}
		for _, t := range types {
			req.questions = append(req.questions, jsonQuestion{name: dns.Fqdn(n), qtype: t})
		}
	}
	if v := q.Get("ip"); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return req, http.StatusBadRequest, "ip: not an IP address: " + v
		}
		req.ip = a.Unmap()
	}
	if v := q.Get("edns_client_subnet"); v != "" {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			p, err = netip.PrefixFrom(a, a.BitLen()), aerr
		}
		if err != nil || p.Addr().Zone() != "" {
			return req, http.StatusBadRequest, "edns_client_subnet: not a prefix or an address: " + v
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		req.ecs = p.Masked()
	}
	switch v := q.Get("cd"); v {
	case "", "0", "false":
	case "1", "true":
		req.cd = true
	default:
		return req, http.StatusBadRequest, "cd: want 0, 1, false or true, not " + v
	}
	return req, 0, ""
}

// QueryMessage is the DNS query of a JSON API question: RD set, EDNS(0)
// with the Client Subnet option of ecs when it is valid (its family's
// full address, SOURCE its length), id 0.
func QueryMessage(name string, qtype uint16, ecs netip.Prefix, cd bool) ([]byte, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id, m.CheckingDisabled = 0, cd
	m.SetEdns0(dns.DefaultMsgSize, false)
	if ecs.IsValid() {
		e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, SourceNetmask: uint8(ecs.Bits()), Address: ecs.Addr().AsSlice()}
		e.Family = 1
		if ecs.Addr().Is6() {
			e.Family = 2
		}
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, e)
	}
	return m.Pack()
}

// JSONOf is the JSON API's reply of the DNS reply wire, located by loc
// (the client address and where it came from, the topology's answer
// for it).
func JSONOf(wire []byte, loc JSONLocation) (JSONReply, error) {
	var m dns.Msg
	if err := m.Unpack(wire); err != nil {
		return JSONReply{}, fmt.Errorf("doh: unpack the reply: %w", err)
	}
	out := JSONReply{Status: m.Rcode, TC: m.Truncated, RD: m.RecursionDesired, RA: m.RecursionAvailable,
		AD: m.AuthenticatedData, CD: m.CheckingDisabled, Location: loc}
	for _, q := range m.Question {
		out.Question = append(out.Question, JSONQuestion{Name: q.Name, Type: q.Qtype})
	}
	out.Answer = jsonRecords(m.Answer)
	out.Authority = jsonRecords(m.Ns)
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				a, _ := netip.AddrFromSlice(e.Address)
				out.ECS = a.Unmap().String() + "/" + strconv.Itoa(int(e.SourceScope))
			}
		}
	}
	return out, nil
}

// jsonRecords is rrs in the JSON API's form.
func jsonRecords(rrs []dns.RR) []JSONRecord {
	var out []JSONRecord
	for _, rr := range rrs {
		h := rr.Header()
		data := strings.TrimPrefix(rr.String(), h.String())
		out = append(out, JSONRecord{Name: h.Name, Type: h.Rrtype, TTL: h.Ttl, Data: data})
	}
	return out
}

// serveJSON answers one JSON API request and returns its status: one
// question, its JSONReply; several (a batch), an array of them in the
// order asked.
func (h *handler) serveJSON(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		return failJSON(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: GET")
	}
	if len(h.o.JSONSecret) > 0 {
		if err := VerifySigned(h.o.JSONSecret, r.URL.Path, r.URL.RawQuery, h.o.Now()); err != nil {
			return failJSON(w, http.StatusForbidden, err.Error())
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return failJSON(w, http.StatusBadRequest, "bad query string: "+err.Error())
	}
	req, code, why := parseJSONRequest(q, h.o.MaxBatch)
	if code != 0 {
		return failJSON(w, code, why)
	}
	at := h.locate(r, ViaJSON, req.ip, req.ecs.IsValid())
	if at.Refused != "" {
		return failJSON(w, at.Status, at.Refused)
	}
	client, from := at.Client, at.From
	replies := make([]JSONReply, 0, len(req.questions))
	var least uint32 // the smallest TTL of every reply's records
	have, cacheable := false, true
	var buf []byte
	for _, jq := range req.questions {
		msg, err := QueryMessage(jq.name, jq.qtype, req.ecs, req.cd)
		if err != nil {
			return failJSON(w, http.StatusBadRequest, "name: "+err.Error())
		}
		buf = h.ans.Exchange(buf[:0], msg, client)
		loc := JSONLocation{Client: client.String(), From: from}
		switch ttl, ok := MinTTL(buf); {
		case !ok:
			cacheable = false
		case !have || ttl < least:
			least, have = ttl, true
		}
		rep, err := JSONOf(buf, loc)
		if err != nil {
			h.o.Logger.Warn("gslb json api: reply cannot be read", "err", err)
			return failJSON(w, http.StatusInternalServerError, "the reply could not be read")
		}
		located := client
		if req.ecs.IsValid() && ecsScope(rep.ECS) > 0 {
			located = req.ecs.Addr()
			rep.Location.Client, rep.Location.From = located.String(), "ecs"
		}
		l := h.ans.Locate(located)
		rep.Location.Labels = map[string]string{}
		maps.Copy(rep.Location.Labels, l.Labels)
		if l.Prefix.IsValid() {
			rep.Location.Prefix = l.Prefix.String()
		}
		replies = append(replies, rep)
	}
	var body []byte
	if len(replies) == 1 {
		body, err = json.Marshal(replies[0])
	} else {
		body, err = json.Marshal(replies)
	}
	if err != nil {
		return failJSON(w, http.StatusInternalServerError, err.Error())
	}
	hd := w.Header()
	hd.Set("Content-Type", MediaDNSJSON)
	if !cacheable {
		least = 0 // a reply without records: not to be kept
	}
	hd.Set("Cache-Control", "private, max-age="+strconv.FormatUint(uint64(least), 10))
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
	return http.StatusOK
}

// ecsScope is the SCOPE of a JSONReply's edns_client_subnet ("" : 0).
func ecsScope(s string) int {
	_, sc, ok := strings.Cut(s, "/")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(sc)
	return n
}

// The errors of a signed request.
var (
	ErrUnsigned = errors.New("doh: the request is not signed: exp= and sig= (the last parameter) are required")
	ErrExpired  = errors.New("doh: the request's signature has expired")
	ErrBadSig   = errors.New("doh: bad signature")
)

// Sign returns the query string rawQuery of a request to path, valid
// until exp, signed with secret: "exp=UNIX" and then "sig=HEX" appended,
// sig the HMAC-SHA256 of path, "?" and the query string before "&sig=".
func Sign(secret []byte, path, rawQuery string, exp time.Time) string {
	q := rawQuery
	if q != "" {
		q += "&"
	}
	q += "exp=" + strconv.FormatInt(exp.Unix(), 10)
	return q + "&sig=" + signature(secret, path, q)
}

// signature is the hex HMAC-SHA256 of path?query under secret.
func signature(secret []byte, path, query string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(path + "?" + query))
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySigned checks the signature of a request to path with the query
// string rawQuery at now (see Sign): sig the last parameter, exp among
// those it covers, not past.
func VerifySigned(secret []byte, path, rawQuery string, now time.Time) error {
	i := strings.LastIndex(rawQuery, "&sig=")
	if i < 0 {
		return ErrUnsigned
	}
	signed, sig := rawQuery[:i], rawQuery[i+len("&sig="):]
	q, err := url.ParseQuery(signed)
	if err != nil || len(q["exp"]) != 1 {
		return ErrUnsigned
	}
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return ErrUnsigned
	}
	if !hmac.Equal([]byte(sig), []byte(signature(secret, path, signed))) {
		return ErrBadSig
	}
	if now.Unix() > exp {
		return ErrExpired
	}
	return nil
}
