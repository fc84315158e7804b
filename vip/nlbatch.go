package vip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// BatchClient is a Client that can apply many writes in one go.
type BatchClient interface {
	Client
	// ApplyBatch performs each op once, in order, as the matching Client
	// method would (no create-or-update fallback), and returns one error
	// or nil per op, in the order of ops. A failed op does not stop the
	// others: a destination whose service could not be created fails too.
	ApplyBatch(ops []Op) []error
}

// ApplyEach performs each op once through c's plain methods: the ApplyBatch
// of a Client without a faster way. It returns one error or nil per op.
func ApplyEach(c Client, ops []Op) []error {
	errs := make([]error, len(ops))
	for i, op := range ops {
		k := op.Service.Key
		switch op.Kind {
		case CreateService:
			errs[i] = c.CreateService(op.Service)
		case UpdateService:
			errs[i] = c.UpdateService(op.Service)
		case DeleteService:
			errs[i] = c.DeleteService(k)
		case CreateDest:
			errs[i] = c.CreateDestination(k, op.Dest)
		case UpdateDest:
			errs[i] = c.UpdateDestination(k, op.Dest)
		case DeleteDest:
			errs[i] = c.DeleteDestination(k, op.Dest.Addr)
		default:
			errs[i] = fmt.Errorf("unknown operation kind %d", op.Kind)
		}
	}
	return errs
}

// Generic netlink numbers of the kernel's IPVS family, from the uapi header
// include/uapi/linux/ip_vs.h.
const (
	ipvsFamilyName = "IPVS"
	ipvsVersion    = 1

	// Commands (enum IPVS_CMD_*).
	ipvsCmdNewService = 1
	ipvsCmdSetService = 2
	ipvsCmdDelService = 3
	ipvsCmdNewDest    = 5
	ipvsCmdSetDest    = 6
	ipvsCmdDelDest    = 7

	// Top-level attributes (IPVS_CMD_ATTR_*), each a nested set.
	ipvsAttrService = 1
	ipvsAttrDest    = 2

	// Service attributes (IPVS_SVC_ATTR_*).
	ipvsSvcAF        = 1 // u16
	ipvsSvcProtocol  = 2 // u16
	ipvsSvcAddr      = 3 // 4 or 16 bytes
	ipvsSvcPort      = 4 // be16
	ipvsSvcSchedName = 6 // string
	ipvsSvcFlags     = 7 // struct ip_vs_flags {u32 flags; u32 mask}
	ipvsSvcTimeout   = 8 // u32 seconds
	ipvsSvcNetmask   = 9 // be32 mask (IPv4), u32 prefix length (IPv6)

	// Destination attributes (IPVS_DEST_ATTR_*).
	ipvsDestAddr      = 1  // 4 or 16 bytes
	ipvsDestPort      = 2  // be16
	ipvsDestFwdMethod = 3  // u32, IP_VS_CONN_F_* forwarding bits
	ipvsDestWeight    = 4  // u32
	ipvsDestUThresh   = 5  // u32
	ipvsDestLThresh   = 6  // u32
	ipvsDestAF        = 11 // u16
	ipvsDestTunType   = 12 // u8, IP_VS_CONN_F_TUNNEL_TYPE_*

	// Forwarding methods (IP_VS_CONN_F_*).
	ipvsFwdMasq   = 0
	ipvsFwdLocal  = 1
	ipvsFwdTunnel = 2
	ipvsFwdDroute = 3

	// Tunnel type of a tunnelling destination (IP_VS_CONN_F_TUNNEL_TYPE_*).
	ipvsTunIPIP = 0
)

// batchCommand maps an operation kind to its IPVS command.
func batchCommand(k OpKind) (uint8, error) {
	switch k {
	case CreateService:
		return ipvsCmdNewService, nil
	case UpdateService:
		return ipvsCmdSetService, nil
	case DeleteService:
		return ipvsCmdDelService, nil
	case CreateDest:
		return ipvsCmdNewDest, nil
	case UpdateDest:
		return ipvsCmdSetDest, nil
	case DeleteDest:
		return ipvsCmdDelDest, nil
	}
	return 0, fmt.Errorf("unknown operation kind %d", k)
}

// addrFamily returns AF_INET or AF_INET6 for a.
func addrFamily(a netip.Addr) uint16 {
	if a.Is4() {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

// encodeService writes the attributes of a service: its identity, and for a
// create or update (full) also the scheduler, flags, timeout and the host
// netmask the kernel insists on. It is the one encoder of services, for
// single requests and batches alike.
func encodeService(ae *netlink.AttributeEncoder, s Service, full bool) {
	a := s.Key.Addr.Unmap()
	ae.Uint16(ipvsSvcAF, addrFamily(a))
	ae.Uint16(ipvsSvcProtocol, uint16(s.Key.Proto))
	ae.Bytes(ipvsSvcAddr, a.AsSlice())
	ae.Bytes(ipvsSvcPort, be16(s.Key.Port))
	if !full {
		return
	}
	ae.String(ipvsSvcSchedName, s.Scheduler)
	flags := make([]byte, 8) // no flags set, all flags masked: clear the rest
	binary.NativeEndian.PutUint32(flags[4:], ^uint32(0))
	ae.Bytes(ipvsSvcFlags, flags)
	ae.Uint32(ipvsSvcTimeout, 0)
	if a.Is4() {
		ae.Bytes(ipvsSvcNetmask, []byte{0xff, 0xff, 0xff, 0xff})
	} else {
		ae.Uint32(ipvsSvcNetmask, 128)
	}
}

// fwdMethod returns the kernel's forwarding method (IP_VS_CONN_F_*) of f;
// a value this package does not name is passed through.
func fwdMethod(f Forwarding) uint32 {
	switch f {
	case DirectRoute:
		return ipvsFwdDroute
	case NAT:
		return ipvsFwdMasq
	case Tunnel:
		return ipvsFwdTunnel
	case Local:
		return ipvsFwdLocal
	}
	return uint32(f)
}

// encodeDest writes the attributes of a destination: its identity, and for
// a create or update (full) also method, weight and the two thresholds,
// and for a tunnel its type, IPIP (as keepalived does; the tunnel port and
// flags matter only for GUE and GRE, and the kernel takes 0 for them when
// absent). It is the one encoder of destinations, for single requests and
// batches alike.
func encodeDest(ae *netlink.AttributeEncoder, d Destination, full bool) {
	a := d.Addr.Addr().Unmap()
	ae.Uint16(ipvsDestAF, addrFamily(a))
	ae.Bytes(ipvsDestAddr, a.AsSlice())
	ae.Bytes(ipvsDestPort, be16(d.Addr.Port()))
	if !full {
		return
	}
	ae.Uint32(ipvsDestFwdMethod, fwdMethod(d.Forwarding))
	ae.Uint32(ipvsDestWeight, d.Weight)
	ae.Uint32(ipvsDestUThresh, 0)
	ae.Uint32(ipvsDestLThresh, 0)
	if d.Forwarding == Tunnel {
		ae.Uint8(ipvsDestTunType, ipvsTunIPIP)
	}
}

// encodeOp returns the generic netlink message (header and attributes) of
// op.
func encodeOp(op Op) (genetlink.Message, error) {
	cmd, err := batchCommand(op.Kind)
	if err != nil {
		return genetlink.Message{}, err
	}
	if !op.Service.Key.Addr.IsValid() {
		return genetlink.Message{}, fmt.Errorf("%s: invalid service address", op)
	}
	ae := netlink.NewAttributeEncoder()
	full := op.Kind == CreateService || op.Kind == UpdateService
	ae.Nested(ipvsAttrService, func(nae *netlink.AttributeEncoder) error {
		encodeService(nae, op.Service, full)
		return nil
	})
	if cmd == ipvsCmdNewDest || cmd == ipvsCmdSetDest || cmd == ipvsCmdDelDest {
		if !op.Dest.Addr.Addr().IsValid() {
			return genetlink.Message{}, fmt.Errorf("%s: invalid destination address", op)
		}
		ae.Nested(ipvsAttrDest, func(nae *netlink.AttributeEncoder) error {
			encodeDest(nae, op.Dest, cmd != ipvsCmdDelDest)
			return nil
		})
	}
	b, err := ae.Encode()
	if err != nil {
		return genetlink.Message{}, fmt.Errorf("%s: encode: %w", op, err)
	}
	return genetlink.Message{
		Header: genetlink.Header{Command: cmd, Version: ipvsVersion},
		Data:   b,
	}, nil
}

// be16 returns v in network byte order: ports are big-endian on the wire,
// unlike the other integers, which are in the host's order.
func be16(v uint16) []byte {
	return binary.BigEndian.AppendUint16(nil, v)
}

// batchRequest returns one request of a batch: op's command for the IPVS
// family, with its own sequence number, asking for an acknowledgement.
func batchRequest(family uint16, seq uint32, op Op) (netlink.Message, error) {
	gm, err := encodeOp(op)
	if err != nil {
		return netlink.Message{}, err
	}
	b, err := gm.MarshalBinary()
	if err != nil {
		return netlink.Message{}, fmt.Errorf("%s: encode: %w", op, err)
	}
	return netlink.Message{
		Header: netlink.Header{
			Length:   uint32(nlmsgHeaderLen + len(b)),
			Type:     netlink.HeaderType(family),
			Flags:    netlink.Request | netlink.Acknowledge,
			Sequence: seq,
		},
		Data: b,
	}, nil
}

// nlmsgHeaderLen is the size of struct nlmsghdr; nlmsgError is the type of
// an error or acknowledgement message (NLMSG_ERROR).
const (
	nlmsgHeaderLen = 16
	nlmsgError     = 2
)

// parseAcks calls ack for every acknowledgement in b, one datagram read
// from a netlink socket: seq is the sequence number of the request it
// answers, errno 0 for success or the kernel's error. Other messages are
// skipped.
func parseAcks(b []byte, ack func(seq uint32, errno syscall.Errno)) error {
	for len(b) > 0 {
		if len(b) < nlmsgHeaderLen {
			return errors.New("netlink: short message header")
		}
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < nlmsgHeaderLen || l > len(b) {
			return fmt.Errorf("netlink: message length %d of %d bytes", l, len(b))
		}
		if binary.NativeEndian.Uint16(b[4:6]) == nlmsgError {
			if l < nlmsgHeaderLen+4 {
				return errors.New("netlink: short error message")
			}
			seq := binary.NativeEndian.Uint32(b[8:12])
			code := int32(binary.NativeEndian.Uint32(b[16:20]))
			ack(seq, syscall.Errno(-code))
		}
		next := min((l+3)&^3, len(b))
		b = b[next:]
	}
	return nil
}

// ackErr turns the errno of an acknowledgement into the Client
// conventions (see kernelErr); 0 is nil.
func ackErr(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return kernelErr(fmt.Errorf("netlink: %w", errno))
}
