package vip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// attrs decodes one level of netlink attributes into type -> payload.
func attrs(t *testing.T, b []byte) map[uint16][]byte {
	t.Helper()
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint16][]byte{}
	for ad.Next() {
		if _, dup := out[ad.Type()]; dup {
			t.Errorf("attribute %d twice", ad.Type())
		}
		out[ad.Type()] = slices.Clone(ad.Bytes())
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func u16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestEncodeBatchRequest(t *testing.T) {
	k4 := ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: UDP}
	k6 := ServiceKey{Addr: netip.MustParseAddr("2001:db8::1"), Port: 5353, Proto: TCP}
	kMapped := ServiceKey{Addr: netip.MustParseAddr("::ffff:192.0.2.1"), Port: 53, Proto: UDP}
	d4 := Destination{Addr: netip.MustParseAddrPort("10.0.0.1:53"), Weight: 7, Forwarding: DirectRoute}
	d6 := Destination{Addr: netip.MustParseAddrPort("[2001:db8::2]:5300"), Weight: 300, Forwarding: Tunnel}
	svc4 := map[uint16][]byte{
		ipvsSvcAF: u16(syscall.AF_INET), ipvsSvcProtocol: u16(17),
		ipvsSvcAddr: {192, 0, 2, 1}, ipvsSvcPort: {0, 53},
	}
	full4 := map[uint16][]byte{
		ipvsSvcAF: u16(syscall.AF_INET), ipvsSvcProtocol: u16(17),
		ipvsSvcAddr: {192, 0, 2, 1}, ipvsSvcPort: {0, 53},
		ipvsSvcSchedName: []byte("wrr\x00"), ipvsSvcFlags: {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff},
		ipvsSvcTimeout: u32(0), ipvsSvcNetmask: {0xff, 0xff, 0xff, 0xff},
	}
	full6 := map[uint16][]byte{
		ipvsSvcAF: u16(syscall.AF_INET6), ipvsSvcProtocol: u16(6),
		ipvsSvcAddr: netip.MustParseAddr("2001:db8::1").AsSlice(), ipvsSvcPort: {0x14, 0xe9},
		ipvsSvcSchedName: []byte("mh\x00"), ipvsSvcFlags: {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff},
		ipvsSvcTimeout: u32(0), ipvsSvcNetmask: u32(128),
	}
	svc6 := map[uint16][]byte{
		ipvsSvcAF: u16(syscall.AF_INET6), ipvsSvcProtocol: u16(6),
		ipvsSvcAddr: netip.MustParseAddr("2001:db8::1").AsSlice(), ipvsSvcPort: {0x14, 0xe9},
	}
	dest4 := map[uint16][]byte{
		ipvsDestAF: u16(syscall.AF_INET), ipvsDestAddr: {10, 0, 0, 1}, ipvsDestPort: {0, 53},
		ipvsDestFwdMethod: u32(ipvsFwdDroute), ipvsDestWeight: u32(7),
		ipvsDestUThresh: u32(0), ipvsDestLThresh: u32(0),
	}
	dest6 := map[uint16][]byte{
		ipvsDestAF: u16(syscall.AF_INET6), ipvsDestAddr: netip.MustParseAddr("2001:db8::2").AsSlice(),
		ipvsDestPort: {0x14, 0xb4}, ipvsDestFwdMethod: u32(ipvsFwdTunnel), ipvsDestWeight: u32(300),
		ipvsDestUThresh: u32(0), ipvsDestLThresh: u32(0), ipvsDestTunType: {ipvsTunIPIP},
	}
	del6 := map[uint16][]byte{
		ipvsDestAF: u16(syscall.AF_INET6), ipvsDestAddr: netip.MustParseAddr("2001:db8::2").AsSlice(),
		ipvsDestPort: {0x14, 0xb4},
	}
	tests := []struct {
		name     string
		op       Op
		cmd      uint8
		svc, dst map[uint16][]byte
	}{
		{"create service v4", Op{Kind: CreateService, Service: Service{Key: k4, Scheduler: "wrr"}}, ipvsCmdNewService, full4, nil},
		{"mapped address is v4", Op{Kind: CreateService, Service: Service{Key: kMapped, Scheduler: "wrr"}}, ipvsCmdNewService, full4, nil},
		{"update service v6", Op{Kind: UpdateService, Service: Service{Key: k6, Scheduler: "mh"}}, ipvsCmdSetService, full6, nil},
		{"delete service", Op{Kind: DeleteService, Service: Service{Key: k4, Scheduler: "wrr"}}, ipvsCmdDelService, svc4, nil},
		{"create dest v4 dr", Op{Kind: CreateDest, Service: Service{Key: k4}, Dest: d4}, ipvsCmdNewDest, svc4, dest4},
		{"update dest v6 tunnel", Op{Kind: UpdateDest, Service: Service{Key: k6}, Dest: d6}, ipvsCmdSetDest, svc6, dest6},
		{"delete dest", Op{Kind: DeleteDest, Service: Service{Key: k6}, Dest: d6}, ipvsCmdDelDest, svc6, del6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := batchRequest(0x1234, 77, tc.op)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var nm netlink.Message
			if err := nm.UnmarshalBinary(wire); err != nil {
				t.Fatal(err)
			}
			h := nm.Header
			if h.Type != 0x1234 || h.Sequence != 77 || h.Flags != netlink.Request|netlink.Acknowledge {
				t.Errorf("header %+v", h)
			}
			var gm genetlink.Message
			if err := gm.UnmarshalBinary(nm.Data); err != nil {
				t.Fatal(err)
			}
			if gm.Header.Command != tc.cmd || gm.Header.Version != ipvsVersion {
				t.Errorf("genetlink header %+v, want command %d version %d", gm.Header, tc.cmd, ipvsVersion)
			}
			top := attrs(t, gm.Data)
			wantTop := 1
			if tc.dst != nil {
				wantTop = 2
			}
			if len(top) != wantTop {
				t.Errorf("%d top-level attributes, want %d", len(top), wantTop)
			}
			if got := attrs(t, top[ipvsAttrService]); fmt.Sprint(got) != fmt.Sprint(tc.svc) {
				t.Errorf("service attributes\n got %v\nwant %v", got, tc.svc)
			}
			if tc.dst != nil {
				if got := attrs(t, top[ipvsAttrDest]); fmt.Sprint(got) != fmt.Sprint(tc.dst) {
					t.Errorf("destination attributes\n got %v\nwant %v", got, tc.dst)
				}
			}
		})
	}
	t.Run("bad ops", func(t *testing.T) {
		for _, op := range []Op{
			{Kind: OpKind(42), Service: Service{Key: k4}},
			{Kind: CreateService},
			{Kind: CreateDest, Service: Service{Key: k4}},
		} {
			if _, err := batchRequest(1, 1, op); err == nil {
				t.Errorf("%s: no error", op)
			}
		}
	})
}

// ackMsg returns a netlink error message answering seq with -errno,
// echoing the request header as the kernel does.
func ackMsg(seq uint32, errno syscall.Errno) []byte {
	b := make([]byte, 36)
	binary.NativeEndian.PutUint32(b[0:], 36)
	binary.NativeEndian.PutUint16(b[4:], nlmsgError)
	binary.NativeEndian.PutUint32(b[8:], seq)
	binary.NativeEndian.PutUint32(b[16:], uint32(-int32(errno)))
	binary.NativeEndian.PutUint32(b[20:], 16)
	binary.NativeEndian.PutUint32(b[28:], seq)
	return b
}

func TestParseAcks(t *testing.T) {
	other := make([]byte, 20) // a message of another type, padded to 20
	binary.NativeEndian.PutUint32(other[0:], 17)
	binary.NativeEndian.PutUint16(other[4:], 0x10)
	binary.NativeEndian.PutUint32(other[8:], 9)
	buf := slices.Concat(ackMsg(5, 0), other, ackMsg(6, syscall.EEXIST), ackMsg(7, syscall.ESRCH))
	var got []string
	if err := parseAcks(buf, func(seq uint32, errno syscall.Errno) {
		got = append(got, fmt.Sprintf("%d:%d", seq, int(errno)))
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"5:0", fmt.Sprintf("6:%d", int(syscall.EEXIST)), fmt.Sprintf("7:%d", int(syscall.ESRCH))}
	if !slices.Equal(got, want) {
		t.Errorf("acks %v, want %v", got, want)
	}
	for _, bad := range [][]byte{buf[:10], buf[:30], ackMsg(1, 0)[:18]} {
		bad := slices.Clone(bad)
		if len(bad) == 18 {
			binary.NativeEndian.PutUint32(bad[0:], 18)
		}
		if err := parseAcks(bad, func(uint32, syscall.Errno) {}); err == nil {
			t.Errorf("%d bytes: no error", len(bad))
		}
	}
}

func TestAckErr(t *testing.T) {
	tests := []struct {
		errno          syscall.Errno
		exist, missing bool
	}{
		{syscall.EEXIST, true, false},
		{syscall.ENOENT, false, true},
		{syscall.ESRCH, false, true},
		{syscall.EINVAL, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			err := ackErr(tc.errno)
			if !errors.Is(err, tc.errno) {
				t.Errorf("%v does not wrap %v", err, tc.errno)
			}
			if errors.Is(err, os.ErrExist) != tc.exist || errors.Is(err, os.ErrNotExist) != tc.missing {
				t.Errorf("%v: exist %v missing %v, want %v %v", err,
					errors.Is(err, os.ErrExist), errors.Is(err, os.ErrNotExist), tc.exist, tc.missing)
			}
		})
	}
	if err := ackErr(0); err != nil {
		t.Errorf("ackErr(0) = %v", err)
	}
}
