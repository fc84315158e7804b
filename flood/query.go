package flood

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Source is where a query was seen.
type Source uint8

// The sources of queries.
const (
	// SourceResponder: the GSLB responder's own UDP and TCP readers.
	SourceResponder Source = iota
	// SourceDnstap: a back-end resolver's CLIENT_QUERY or
	// CLIENT_RESPONSE message.
	SourceDnstap
	numSources
)

// String is the source's name ("responder", "dnstap").
func (s Source) String() string {
	switch s {
	case SourceResponder:
		return "responder"
	case SourceDnstap:
		return "dnstap"
	}
	return fmt.Sprintf("source%d", uint8(s))
}

// ParseSource is the source named s ("responder", "dnstap").
func ParseSource(s string) (Source, error) {
	for src := range numSources {
		if s == src.String() {
			return src, nil
		}
	}
	return 0, fmt.Errorf("flood: unknown source %q (want responder or dnstap)", s)
}

// NoRcode is the Rcode of a query that got no reply (or whose reply is
// not known, as for a dnstap CLIENT_QUERY).
const NoRcode = 0xff

// Query is one DNS query seen: who asked what, and what it got.
type Query struct {
	// Client is the address the query came from.
	Client netip.Addr
	// Name is the question's name, in presentation form (any case, with
	// or without the final dot); empty for a query without a question.
	Name string
	// Type is the question's type.
	Type uint16
	// Rcode is the reply's response code (the header's 4 bits), or
	// NoRcode.
	Rcode uint8
	// Source is where it was seen.
	Source Source
}

// Kind is a kind of key counted.
type Kind uint8

// The kinds of key, each with its own summaries.
const (
	// KindClient: the client's address.
	KindClient Kind = iota
	// KindPrefix: the client's network, /24 for IPv4 and /56 for IPv6
	// (PrefixBits4, PrefixBits6).
	KindPrefix
	// KindName: the query name, lower-cased, fully qualified.
	KindName
	// KindSuffix: the part of the name that one owner answers for
	// (Suffix).
	KindSuffix
	// KindNameType: the query name and type ("www.example.com. A").
	KindNameType
	numKinds
)

// Kinds are all kinds, in order.
var kindNames = [numKinds]string{"clients", "prefixes", "names", "suffixes", "nametypes"}

// String is the kind's plural name, as lbctl top and GET /v1/top take
// it ("clients", "prefixes", "names", "suffixes", "nametypes").
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// Singular is the kind's singular name ("client", "prefix", "name",
// "suffix", "name and type").
func (k Kind) Singular() string {
	switch k {
	case KindClient:
		return "client"
	case KindPrefix:
		return "prefix"
	case KindName:
		return "name"
	case KindSuffix:
		return "suffix"
	case KindNameType:
		return "name and type"
	}
	return k.String()
}

// ParseKind is the kind named s (as Kind.String gives it; the singular
// is accepted too).
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if s == n || s+"s" == n || s+"es" == n {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("flood: unknown kind %q (want clients, prefixes, names, suffixes or nametypes)", s)
}

// The client prefix lengths of KindPrefix.
const (
	PrefixBits4 = 24
	PrefixBits6 = 56
)

// Prefix is the client prefix a is counted under (KindPrefix).
func Prefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := PrefixBits6
	if a.Is4() {
		bits = PrefixBits4
	}
	p, _ := a.WithZone("").Prefix(bits)
	return p
}

// Suffixer tells the suffix of a name (KindSuffix): under one of its
// zones (the GSLB zones), the zone and one label more
// ("app.gslb.example.com." for "www.app.gslb.example.com." in zone
// "gslb.example.com."; the zone itself for its apex); under none, the
// last two labels ("example.com.", and "co.uk." for "www.example.co.uk.":
// no public suffix list is consulted), or the name itself when it has
// fewer. Names are lower-cased and fully qualified. The zero Suffixer
// has no zones.
type Suffixer struct {
	zones []string
}

// NewSuffixer returns a Suffixer over zones (any case, with or without
// the final dot).
func NewSuffixer(zones []string) Suffixer {
	var s Suffixer
	for _, z := range zones {
		s.zones = append(s.zones, dns.Fqdn(strings.ToLower(z)))
	}
	return s
}

// Suffix is name's suffix; name must be lower-cased and fully qualified.
// It does not allocate: the result is a tail of name.
func (s Suffixer) Suffix(name string) string { return name[suffixStart(s.zones, name):] }

// suffixStart is where the suffix of name (lower-cased, fully
// qualified) starts.
func suffixStart[T string | []byte](zones []string, name T) int {
	best := -1
	for _, z := range zones {
		if len(z) <= best || len(z) > len(name) || string(name[len(name)-len(z):]) != z {
			continue
		}
		if len(z) == len(name) || z == "." || name[len(name)-len(z)-1] == '.' {
			best = len(z)
		}
	}
	if best >= 0 {
		if best == len(name) {
			return 0
		}
		// The label before the zone's (and its dot).
		for i := len(name) - best - 2; i >= 0; i-- {
			if name[i] == '.' {
				return i + 1
			}
		}
		return 0
	}
	return lastLabels(name, 2)
}

// lastLabels is where the last n labels of the fully qualified name
// start.
func lastLabels[T string | []byte](name T, n int) int {
	if len(name) <= 1 {
		return 0
	}
	for i := len(name) - 2; i >= 0; i-- {
		if name[i] == '.' {
			n--
			if n == 0 {
				return i + 1
			}
		}
	}
	return 0
}
