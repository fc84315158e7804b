package responder

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// Extended DNS Errors (RFC 8914) the responder puts on answers that are
// not the normal ones, so that a resolver, or the person reading its
// logs, can tell them apart: the text names the reason.
const (
	edeLastResortFailOpen = "lbdns: no member up, last resort fail-open (every member answered)"
	edeLastResortStatic   = "lbdns: no member up, last resort static answer"
	edeLastResortServfail = "lbdns: no member up, last resort SERVFAIL"
	edeEmergency          = "lbdns: intelligent resolution off (emergency switch), static answer"
	edeRaised             = "lbdns: TTL raised by the operator"
	edeNotReady           = "lbdns: no answers built yet"
	edeNotAuthoritative   = "lbdns: outside the zones served here"
)

// edeOf returns the Extended DNS Error of a reply of rcode whose
// snapshot response is r (asked false: there was no snapshot), and false
// for a normal answer (a policy's members, zone data, NXDOMAIN, NODATA).
func edeOf(rcode int, r *gslb.Response, asked bool) (uint16, string, bool) {
	switch {
	case !asked && rcode == dns.RcodeServerFailure:
		return dns.ExtendedErrorCodeNotReady, edeNotReady, true
	case r.LastResort == gslb.TraceServfail:
		return dns.ExtendedErrorCodeOther, edeLastResortServfail, true
	case r.LastResort == gslb.TraceStatic:
		return dns.ExtendedErrorCodeOther, edeLastResortStatic, true
	case r.LastResort != "":
		return dns.ExtendedErrorCodeOther, edeLastResortFailOpen, true
	case r.Policy == gslb.PolicyEmergency:
		return dns.ExtendedErrorCodeOther, edeEmergency, true
	case rcode == dns.RcodeRefused:
		return dns.ExtendedErrorCodeNotAuthoritative, edeNotAuthoritative, true
	case r.Raised:
		return dns.ExtendedErrorCodeOther, edeRaised, true
	}
	return 0, "", false
}

// appendEDE appends the Extended DNS Error option of code and text (no
// allocation once b has room).
func appendEDE(b []byte, code uint16, text string) []byte {
	b = binary.BigEndian.AppendUint16(b, dns.EDNS0EDE)
	b = binary.BigEndian.AppendUint16(b, uint16(2+len(text)))
	b = binary.BigEndian.AppendUint16(b, code)
	return append(b, text...)
}
