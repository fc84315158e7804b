package probes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ErrNoVersion is wrapped by Identify's error when the target answered but
// gave no version: an rcode other than NOERROR (Knot Resolver 5.6 answers
// REFUSED or SERVFAIL depending on its modules, BIND may be configured to
// refuse), or no TXT record.
var ErrNoVersion = errors.New("probes: no version answer")

// Identify asks target for CHAOS TXT version.bind. over UDP (TCP when the
// reply is truncated), judged by the same exchange-and-validate core as
// health probes, and returns the
// TXT text (strings of the first TXT record joined). The budget is the
// deadline of ctx, or 1s when it has none. Callers treat an error as an
// unknown vendor; in particular Knot Resolver gives no version by default,
// so it cannot be confirmed this way.
func Identify(ctx context.Context, target netip.AddrPort) (string, error) {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, defaultTimeout)
	defer cancel()

	q := new(dns.Msg)
	q.Id = uint16(rand.Uint32())
	q.Question = []dns.Question{{Name: "version.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS}}
	wire, err := q.Pack()
	if err != nil {
		return "", fmt.Errorf("identify %s: pack query: %w", target, err)
	}
	r, _, detail, _ := roundTrip(ctx, target, "udp", q, wire, deadline.Sub(start))
	if r == nil {
		return "", fmt.Errorf("identify %s: %s", target, detail)
	}
	if r.Rcode != dns.RcodeSuccess {
		return "", fmt.Errorf("identify %s: version.bind: rcode %s: %w", target, rcodeName(r.Rcode), ErrNoVersion)
	}
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			return strings.Join(txt.Txt, ""), nil
		}
	}
	return "", fmt.Errorf("identify %s: version.bind: no TXT answer: %w", target, ErrNoVersion)
}

// VendorOf maps a version.bind answer to a vendor name: "bind", "unbound",
// "powerdns", "knot", "dnsmasq", or "" when unknown. BIND answers a bare
// version number ("9.18.49-1~deb12u3-Debian"); the others name themselves
// ("unbound 1.17.1", "PowerDNS Recursor 4.8.8", "dnsmasq-2.90").
func VendorOf(version string) string {
	v := strings.ToLower(strings.TrimSpace(version))
	switch {
	case strings.HasPrefix(v, "unbound"):
		return "unbound"
	case strings.HasPrefix(v, "powerdns"):
		return "powerdns"
	case strings.HasPrefix(v, "dnsmasq"):
		return "dnsmasq"
	case strings.HasPrefix(v, "knot"):
		return "knot"
	case isBINDVersion(v), isBINDVersion(strings.TrimPrefix(v, "bind ")):
		return "bind"
	}
	return ""
}

// isBINDVersion reports whether v starts like ^9\.\d+\.\d+.
func isBINDVersion(v string) bool {
	rest, ok := strings.CutPrefix(v, "9.")
	if !ok {
		return false
	}
	rest, ok = cutDigits(rest)
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, ".")
	if !ok {
		return false
	}
	_, ok = cutDigits(rest)
	return ok
}

// cutDigits removes a leading run of ASCII digits; ok if there was one.
func cutDigits(s string) (rest string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[i:], i > 0
}
