// Package dnstap decodes dnstap messages (https://dnstap.info, the
// protobuf schema dnstap.proto) as resolvers send them about their
// clients: CLIENT_QUERY and CLIENT_RESPONSE, with the client's address,
// the question's name and type, the response's rcode, the timestamps and
// the sender's identity and version. Other message types are recognised
// and reported as such, without their details.
//
// Decoding reads the protobuf wire format directly
// (google.golang.org/protobuf/encoding/protowire): no generated code, no
// allocation per message beyond the query name, and the identity and
// version strings kept from one message to the next while they do not
// change.
package dnstap

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/protobuf/encoding/protowire"
)

// ContentType is the Frame Streams content type of dnstap.
const ContentType = "protobuf:dnstap.Dnstap"

// Type is a dnstap Message.Type.
type Type uint8

// The message types of dnstap.proto.
const (
	AuthQuery         Type = 1
	AuthResponse      Type = 2
	ResolverQuery     Type = 3
	ResolverResponse  Type = 4
	ClientQuery       Type = 5
	ClientResponse    Type = 6
	ForwarderQuery    Type = 7
	ForwarderResponse Type = 8
	StubQuery         Type = 9
	StubResponse      Type = 10
	ToolQuery         Type = 11
	ToolResponse      Type = 12
	UpdateQuery       Type = 13
	UpdateResponse    Type = 14
)

var typeNames = [...]string{"", "auth_query", "auth_response", "resolver_query", "resolver_response",
	"client_query", "client_response", "forwarder_query", "forwarder_response", "stub_query",
	"stub_response", "tool_query", "tool_response", "update_query", "update_response"}

// String returns the type's name in lower case ("client_query"), or
// "type N" for a type dnstap.proto does not define.
func (t Type) String() string {
	if int(t) < len(typeNames) && t != 0 {
		return typeNames[t]
	}
	return fmt.Sprintf("type %d", t)
}

// Client reports whether t is CLIENT_QUERY or CLIENT_RESPONSE.
func (t Type) Client() bool { return t == ClientQuery || t == ClientResponse }

// Protocol is a dnstap SocketProtocol.
type Protocol uint8

// The socket protocols of dnstap.proto.
const (
	UDP         Protocol = 1
	TCP         Protocol = 2
	DOT         Protocol = 3
	DOH         Protocol = 4
	DNSCryptUDP Protocol = 5
	DNSCryptTCP Protocol = 6
	DOQ         Protocol = 7
)

// Message is one decoded dnstap message. For types other than
// CLIENT_QUERY and CLIENT_RESPONSE only Type, Identity and Version are
// set.
type Message struct {
	// Identity and Version are the sender's (dnstap's identity and
	// version fields), "" when it sends none.
	Identity, Version string
	// Type is the message type.
	Type Type
	// Protocol is the transport the client used, 0 when not sent.
	Protocol Protocol
	// Client and ClientPort are the query's initiator (query_address,
	// query_port): the resolver's client. Client is invalid when the
	// message carries no address.
	Client     netip.Addr
	ClientPort uint16
	// Server is the address the query was sent to (response_address),
	// invalid when not sent.
	Server netip.Addr
	// Time is when the resolver saw the query (CLIENT_QUERY) or sent the
	// response (CLIENT_RESPONSE); the zero time when not sent.
	Time time.Time
	// QueryTime is the query's time also on a response, when the sender
	// gives it (BIND does, unbound does not).
	QueryTime time.Time
	// Name is the question's name, lower case, fully qualified, in
	// presentation format ("www.example.com.").
	Name string
	// QType and QClass are the question's type and class.
	QType, QClass uint16
	// Rcode is the response's rcode (the header's four bits), -1 on a
	// query.
	Rcode int
}

// Errors of Decode; test with errors.Is.
var (
	// ErrMalformed is a payload that is not a dnstap protobuf message,
	// or a client message whose DNS message is not one.
	ErrMalformed = errors.New("dnstap: malformed message")
)

// Field numbers of dnstap.proto.
const (
	fDnstapIdentity = 1
	fDnstapVersion  = 2
	fDnstapMessage  = 14
	fDnstapType     = 15

	fMsgType         = 1
	fMsgProtocol     = 3
	fMsgQueryAddr    = 4
	fMsgRespAddr     = 5
	fMsgQueryPort    = 6
	fMsgQuerySec     = 8
	fMsgQueryNsec    = 9
	fMsgQueryMessage = 10
	fMsgRespSec      = 12
	fMsgRespNsec     = 13
	fMsgRespMessage  = 14
)

// Decoder decodes the dnstap messages of one sender. It keeps the last
// identity and version so that a stream of messages from one resolver
// allocates them once. It is not safe for concurrent use; the zero value
// is ready.
type Decoder struct {
	identity, version string
}

// Decode decodes one dnstap payload (a Frame Streams data frame) into m,
// overwriting it. A message of a type other than the client ones is not
// an error: m.Type says what it was. Errors wrap ErrMalformed.
func (d *Decoder) Decode(b []byte, m *Message) error {
	*m = Message{Rcode: -1}
	var msg []byte
	var haveType, haveMsg bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case (num == fDnstapIdentity || num == fDnstapVersion) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: identity or version: %v", ErrMalformed, protowire.ParseError(n))
			}
			if num == fDnstapIdentity {
				d.identity = keep(d.identity, v)
				m.Identity = d.identity
			} else {
				d.version = keep(d.version, v)
				m.Version = d.version
			}
			b = b[n:]
		case num == fDnstapMessage && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: message: %v", ErrMalformed, protowire.ParseError(n))
			}
			msg, haveMsg = v, true
			b = b[n:]
		case num == fDnstapType && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: type: %v", ErrMalformed, protowire.ParseError(n))
			}
			if v != 1 { // MESSAGE, the only type dnstap.proto defines
				return fmt.Errorf("%w: Dnstap.type %d, want MESSAGE (1)", ErrMalformed, v)
			}
			haveType = true
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if !haveType {
		return fmt.Errorf("%w: no Dnstap.type", ErrMalformed)
	}
	if !haveMsg {
		return fmt.Errorf("%w: no Dnstap.message", ErrMalformed)
	}
	return decodeMessage(msg, m)
}

// keep returns old when it holds the bytes v, else a new string of v.
func keep(old string, v []byte) string {
	if old == string(v) { // no allocation: the compiler compares in place
		return old
	}
	return string(v)
}

// decodeMessage decodes a dnstap Message into m.
func decodeMessage(b []byte, m *Message) error {
	var qsec, rsec uint64
	var qnsec, rnsec uint32
	var haveQTime, haveRTime bool
	var query, resp []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: Message: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var bs []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: Message field %d: %v", ErrMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == fMsgType && typ == protowire.VarintType:
			if v == 0 || v > 255 {
				return fmt.Errorf("%w: Message.type %d", ErrMalformed, v)
			}
			m.Type = Type(v)
		case num == fMsgProtocol && typ == protowire.VarintType:
			if v <= 255 {
				m.Protocol = Protocol(v)
			}
		case num == fMsgQueryAddr && typ == protowire.BytesType:
			a, ok := netip.AddrFromSlice(bs)
			if !ok {
				return fmt.Errorf("%w: query_address of %d bytes", ErrMalformed, len(bs))
			}
			m.Client = a.Unmap()
		case num == fMsgRespAddr && typ == protowire.BytesType:
			a, ok := netip.AddrFromSlice(bs)
			if !ok {
				return fmt.Errorf("%w: response_address of %d bytes", ErrMalformed, len(bs))
			}
			m.Server = a.Unmap()
		case num == fMsgQueryPort && typ == protowire.VarintType:
			if v > 65535 {
				return fmt.Errorf("%w: query_port %d", ErrMalformed, v)
			}
			m.ClientPort = uint16(v)
		case num == fMsgQuerySec && typ == protowire.VarintType:
			qsec, haveQTime = v, true
		case num == fMsgQueryNsec && typ == protowire.Fixed32Type:
			qnsec = uint32(v)
		case num == fMsgRespSec && typ == protowire.VarintType:
			rsec, haveRTime = v, true
		case num == fMsgRespNsec && typ == protowire.Fixed32Type:
			rnsec = uint32(v)
		case num == fMsgQueryMessage && typ == protowire.BytesType:
			query = bs
		case num == fMsgRespMessage && typ == protowire.BytesType:
			resp = bs
		}
	}
	if m.Type == 0 {
		return fmt.Errorf("%w: no Message.type", ErrMalformed)
	}
	if !m.Type.Client() {
		return nil
	}
	if haveQTime {
		m.QueryTime = unixTime(qsec, qnsec)
	}
	dnsMsg := query
	m.Time = m.QueryTime
	if m.Type == ClientResponse {
		if haveRTime {
			m.Time = unixTime(rsec, rnsec)
		}
		if resp == nil {
			return fmt.Errorf("%w: CLIENT_RESPONSE without response_message", ErrMalformed)
		}
		if len(resp) < 12 {
			return fmt.Errorf("%w: response_message of %d bytes", ErrMalformed, len(resp))
		}
		m.Rcode = int(resp[3] & 0x0f)
		dnsMsg = resp
	} else if query == nil {
		return fmt.Errorf("%w: CLIENT_QUERY without query_message", ErrMalformed)
	}
	return question(dnsMsg, m)
}

// unixTime is a dnstap timestamp as a time; seconds beyond what a time
// holds are clamped rather than wrapped.
func unixTime(sec uint64, nsec uint32) time.Time {
	const maxSec = 1 << 40 // about 34,000 years
	if sec > maxSec {
		sec = maxSec
	}
	if nsec >= 1e9 {
		nsec = 1e9 - 1
	}
	return time.Unix(int64(sec), int64(nsec)).UTC()
}

// question sets m's name, type and class from the first question of the
// DNS message b.
func question(b []byte, m *Message) error {
	if len(b) < 12 {
		return fmt.Errorf("%w: DNS message of %d bytes", ErrMalformed, len(b))
	}
	if qd := int(b[4])<<8 | int(b[5]); qd == 0 {
		return fmt.Errorf("%w: DNS message without a question", ErrMalformed)
	}
	name, off, err := dns.UnpackDomainName(b, 12)
	if err != nil {
		return fmt.Errorf("%w: question name: %v", ErrMalformed, err)
	}
	if off+4 > len(b) {
		return fmt.Errorf("%w: question truncated", ErrMalformed)
	}
	m.Name = strings.ToLower(name)
	m.QType = uint16(b[off])<<8 | uint16(b[off+1])
	m.QClass = uint16(b[off+2])<<8 | uint16(b[off+3])
	return nil
}
