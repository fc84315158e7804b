package vip

import (
	"fmt"
	"net/netip"
)

// Protocol is a transport protocol of a virtual service.
type Protocol uint8

// Protocols a virtual service can have.
const (
	UDP Protocol = 17
	TCP Protocol = 6
)

// String returns "udp" or "tcp".
func (p Protocol) String() string {
	switch p {
	case UDP:
		return "udp"
	case TCP:
		return "tcp"
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// Forwarding is the IPVS forwarding method of a destination.
type Forwarding uint8

// Forwarding methods.
const (
	DirectRoute Forwarding = iota
	NAT
	Tunnel
)

// String returns "dr", "nat" or "tunnel".
func (f Forwarding) String() string {
	switch f {
	case DirectRoute:
		return "dr"
	case NAT:
		return "nat"
	case Tunnel:
		return "tunnel"
	}
	return fmt.Sprintf("fwd(%d)", uint8(f))
}

// ServiceKey identifies a virtual service: address, port and protocol.
type ServiceKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto Protocol
}

// String returns "udp/192.0.2.1:53".
func (k ServiceKey) String() string {
	return k.Proto.String() + "/" + netip.AddrPortFrom(k.Addr, k.Port).String()
}

// Destination is one real server behind a virtual service, identified by
// Addr.
type Destination struct {
	Addr       netip.AddrPort
	Weight     uint32
	Forwarding Forwarding
}

// Service is the desired or actual state of one virtual service. Only the
// identity and settings are here; traffic statistics are kept apart.
type Service struct {
	Key       ServiceKey
	Scheduler string
	// Dests is keyed by the destination's address.
	Dests map[netip.AddrPort]Destination
}

// Table is a set of virtual services keyed by identity.
type Table map[ServiceKey]Service
