package vip

import (
	"fmt"
	"net/netip"
	"slices"
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
	// Local is what the kernel reports for a destination whose address is
	// local to the host, whatever method it was created with. It is never
	// needed in a desired table; Diff treats a current Local destination as
	// matching any desired method, because re-sending the method would not
	// change what the kernel reports.
	Local
)

// String returns "dr", "nat", "tunnel" or "local".
func (f Forwarding) String() string {
	switch f {
	case DirectRoute:
		return "dr"
	case NAT:
		return "nat"
	case Tunnel:
		return "tunnel"
	case Local:
		return "local"
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

// Compare orders service keys by address, then port, then protocol. It
// returns -1, 0 or +1.
func (k ServiceKey) Compare(o ServiceKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if k.Port != o.Port {
		if k.Port < o.Port {
			return -1
		}
		return 1
	}
	if k.Proto != o.Proto {
		if k.Proto < o.Proto {
			return -1
		}
		return 1
	}
	return 0
}

// String returns "10.0.0.1:53 w=100 dr".
func (d Destination) String() string {
	return fmt.Sprintf("%s w=%d %s", d.Addr, d.Weight, d.Forwarding)
}

// Clone returns a deep copy of s: the copy's Dests map is its own.
func (s Service) Clone() Service {
	c := s
	if s.Dests != nil {
		c.Dests = make(map[netip.AddrPort]Destination, len(s.Dests))
		for a, d := range s.Dests {
			c.Dests[a] = d
		}
	}
	return c
}

// Clone returns a deep copy of t.
func (t Table) Clone() Table {
	c := make(Table, len(t))
	for k, s := range t {
		c[k] = s.Clone()
	}
	return c
}

// Keys returns the keys of t in Compare order.
func (t Table) Keys() []ServiceKey {
	keys := make([]ServiceKey, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, ServiceKey.Compare)
	return keys
}
