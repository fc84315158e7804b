package vip

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// sentRequest is one request a KernelClient handed to its socket, less
// its sequence number.
type sentRequest struct {
	typ   netlink.HeaderType
	flags netlink.HeaderFlags
	data  []byte
}

// recordingKernel returns a KernelClient whose socket records the requests
// instead of sending them, and acknowledges each with success.
func recordingKernel(sent *[]sentRequest) *KernelClient {
	b := &batchConn{family: 0x1234}
	b.exchange = func(chunk []netlink.Message, index []int, errs []error) {
		for j, m := range chunk {
			*sent = append(*sent, sentRequest{typ: m.Header.Type, flags: m.Header.Flags, data: m.Data})
			errs[index[j]] = nil
		}
	}
	return &KernelClient{batch: b}
}

// TestOneEncoderBothPaths: the Client methods (one request each) and
// ApplyBatch put the same bytes on the wire for the same operations,
// tunnel forwarding included.
func TestOneEncoderBothPaths(t *testing.T) {
	k4 := ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: UDP}
	k6 := ServiceKey{Addr: netip.MustParseAddr("2001:db8::1"), Port: 53, Proto: TCP}
	dr := Destination{Addr: netip.MustParseAddrPort("10.0.0.1:53"), Weight: 7, Forwarding: DirectRoute}
	nat := Destination{Addr: netip.MustParseAddrPort("10.0.0.2:53"), Weight: 8, Forwarding: NAT}
	tun4 := Destination{Addr: netip.MustParseAddrPort("10.0.0.3:53"), Weight: 9, Forwarding: Tunnel}
	tun6 := Destination{Addr: netip.MustParseAddrPort("[2001:db8::2]:53"), Weight: 300, Forwarding: Tunnel}
	ops := []Op{
		{Kind: CreateService, Service: Service{Key: k4, Scheduler: "wrr"}},
		{Kind: CreateService, Service: Service{Key: k6, Scheduler: "mh"}},
		{Kind: UpdateService, Service: Service{Key: k4, Scheduler: "rr"}},
		{Kind: CreateDest, Service: Service{Key: k4}, Dest: dr},
		{Kind: CreateDest, Service: Service{Key: k4}, Dest: nat},
		{Kind: CreateDest, Service: Service{Key: k4}, Dest: tun4},
		{Kind: CreateDest, Service: Service{Key: k6}, Dest: tun6},
		{Kind: UpdateDest, Service: Service{Key: k6}, Dest: tun6},
		{Kind: DeleteDest, Service: Service{Key: k6}, Dest: tun6},
		{Kind: DeleteService, Service: Service{Key: k6}},
	}

	var single []sentRequest
	kc := recordingKernel(&single)
	for _, op := range ops {
		var err error
		switch op.Kind {
		case CreateService:
			err = kc.CreateService(op.Service)
		case UpdateService:
			err = kc.UpdateService(op.Service)
		case DeleteService:
			err = kc.DeleteService(op.Service.Key)
		case CreateDest:
			err = kc.CreateDestination(op.Service.Key, op.Dest)
		case UpdateDest:
			err = kc.UpdateDestination(op.Service.Key, op.Dest)
		case DeleteDest:
			err = kc.DeleteDestination(op.Service.Key, op.Dest.Addr)
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	var batched []sentRequest
	kb := recordingKernel(&batched)
	for i, err := range kb.ApplyBatch(ops) {
		if err != nil {
			t.Fatalf("batch op %d: %v", i, err)
		}
	}
	if kc.BatchSends() != 0 || kb.BatchSends() != 1 {
		t.Errorf("sendmsg counts: single path %d, batch %d; want 0 and 1", kc.BatchSends(), kb.BatchSends())
	}
	if len(single) != len(ops) || len(batched) != len(ops) {
		t.Fatalf("%d single and %d batched requests for %d ops", len(single), len(batched), len(ops))
	}
	for i, op := range ops {
		s, b := single[i], batched[i]
		if s.typ != b.typ || s.flags != b.flags || !bytes.Equal(s.data, b.data) {
			t.Errorf("%s: single request %+v differs from batched %+v", op, s, b)
		}
		if s.typ != 0x1234 || s.flags != netlink.Request|netlink.Acknowledge {
			t.Errorf("%s: header type %#x flags %v", op, s.typ, s.flags)
		}
	}

	// The tunnel destinations carry the tunnel type, the others do not.
	for i, op := range ops {
		if op.Kind != CreateDest && op.Kind != UpdateDest {
			continue
		}
		var gm genetlink.Message
		if err := gm.UnmarshalBinary(single[i].data); err != nil {
			t.Fatal(err)
		}
		d := attrs(t, attrs(t, gm.Data)[ipvsAttrDest])
		tt, ok := d[ipvsDestTunType]
		if want := op.Dest.Forwarding == Tunnel; ok != want || ok && !bytes.Equal(tt, []byte{ipvsTunIPIP}) {
			t.Errorf("%s: tunnel type attribute %v (present %v), want present %v", op, tt, ok, want)
		}
	}
}
