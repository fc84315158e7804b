package dnstap

import (
	"net/netip"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Payload is what AppendPayload encodes: a client message as a resolver
// sends it.
type Payload struct {
	Identity, Version string
	Type              Type
	Protocol          Protocol
	Client            netip.AddrPort
	Server            netip.AddrPort
	// Time is the query's time on a query, the response's on a
	// response.
	Time time.Time
	// DNS is the DNS message in wire format: the query_message of a
	// query, the response_message of a response.
	DNS []byte
}

// AppendPayload appends p encoded as a dnstap protobuf message (the
// payload of one Frame Streams data frame) to b. It is the inverse of
// Decoder.Decode for client messages, for tests and tools that send
// dnstap.
func AppendPayload(b []byte, p Payload) []byte {
	var m []byte
	m = protowire.AppendTag(m, fMsgType, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(p.Type))
	if p.Client.IsValid() {
		m = protowire.AppendTag(m, 2, protowire.VarintType) // socket_family
		if p.Client.Addr().Is4() {
			m = protowire.AppendVarint(m, 1)
		} else {
			m = protowire.AppendVarint(m, 2)
		}
	}
	if p.Protocol != 0 {
		m = protowire.AppendTag(m, fMsgProtocol, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.Protocol))
	}
	if p.Client.IsValid() {
		m = protowire.AppendTag(m, fMsgQueryAddr, protowire.BytesType)
		m = protowire.AppendBytes(m, p.Client.Addr().AsSlice())
		m = protowire.AppendTag(m, fMsgQueryPort, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.Client.Port()))
	}
	if p.Server.IsValid() {
		m = protowire.AppendTag(m, fMsgRespAddr, protowire.BytesType)
		m = protowire.AppendBytes(m, p.Server.Addr().AsSlice())
		m = protowire.AppendTag(m, 7, protowire.VarintType) // response_port
		m = protowire.AppendVarint(m, uint64(p.Server.Port()))
	}
	sec, nsec, msg := fMsgQuerySec, fMsgQueryNsec, fMsgQueryMessage
	if p.Type == ClientResponse || p.Type%2 == 0 {
		sec, nsec, msg = fMsgRespSec, fMsgRespNsec, fMsgRespMessage
	}
	if !p.Time.IsZero() {
		m = protowire.AppendTag(m, protowire.Number(sec), protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.Time.Unix()))
		m = protowire.AppendTag(m, protowire.Number(nsec), protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, uint32(p.Time.Nanosecond()))
	}
	if p.DNS != nil {
		m = protowire.AppendTag(m, protowire.Number(msg), protowire.BytesType)
		m = protowire.AppendBytes(m, p.DNS)
	}
	if p.Identity != "" {
		b = protowire.AppendTag(b, fDnstapIdentity, protowire.BytesType)
		b = protowire.AppendString(b, p.Identity)
	}
	if p.Version != "" {
		b = protowire.AppendTag(b, fDnstapVersion, protowire.BytesType)
		b = protowire.AppendString(b, p.Version)
	}
	b = protowire.AppendTag(b, fDnstapMessage, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	b = protowire.AppendTag(b, fDnstapType, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}
