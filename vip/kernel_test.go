package vip

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cloudflare/ipvs"
	"github.com/cloudflare/ipvs/netmask"
)

func TestToIPVSService(t *testing.T) {
	tests := []struct {
		name string
		key  ServiceKey
		want ipvs.Service
	}{
		{"v4 udp", kU, ipvs.Service{Address: netip.MustParseAddr("192.0.2.1"), Port: 53, Protocol: ipvs.UDP, Scheduler: "wrr", Family: ipvs.INET, Netmask: netmask.MaskFrom(32, 32)}},
		{"v4 tcp", kT, ipvs.Service{Address: netip.MustParseAddr("192.0.2.1"), Port: 53, Protocol: ipvs.TCP, Scheduler: "wrr", Family: ipvs.INET, Netmask: netmask.MaskFrom(32, 32)}},
		{"v6", k6, ipvs.Service{Address: netip.MustParseAddr("2001:db8::1"), Port: 53, Protocol: ipvs.UDP, Scheduler: "wrr", Family: ipvs.INET6, Netmask: netmask.MaskFrom(128, 128)}},
		{"v4-mapped is v4", key("[::ffff:192.0.2.1]:53", UDP), ipvs.Service{Address: netip.MustParseAddr("192.0.2.1"), Port: 53, Protocol: ipvs.UDP, Scheduler: "wrr", Family: ipvs.INET, Netmask: netmask.MaskFrom(32, 32)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toIPVSService(tc.key, "wrr")
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			back, ok := fromIPVSService(got)
			if !ok || back.Key != (ServiceKey{Addr: tc.key.Addr.Unmap(), Port: tc.key.Port, Proto: tc.key.Proto}) || back.Scheduler != "wrr" {
				t.Errorf("round trip gave %+v, %v", back, ok)
			}
		})
	}
}

func TestFromIPVSServiceSkips(t *testing.T) {
	if _, ok := fromIPVSService(ipvs.Service{FWMark: 7, Family: ipvs.INET, Protocol: ipvs.TCP}); ok {
		t.Error("fwmark service was mapped")
	}
	s, ok := fromIPVSService(ipvs.Service{Address: netip.AddrFrom16([16]byte{192, 0, 2, 1}), Port: 53, Family: ipvs.INET, Protocol: ipvs.UDP})
	if !ok || s.Key != kU {
		t.Errorf("padded v4 address mapped to %v, %v", s.Key, ok)
	}
}

func TestDestMapping(t *testing.T) {
	tests := []struct {
		fwd  Forwarding
		kern ipvs.ForwardType
	}{
		{DirectRoute, ipvs.DirectRoute},
		{NAT, ipvs.Masquerade},
		{Tunnel, ipvs.Tunnel},
		{Local, ipvs.Local},
	}
	for _, tc := range tests {
		for _, a := range []string{"10.0.0.1:53", "[2001:db8::2]:5353"} {
			t.Run(fmt.Sprintf("%s %s", tc.fwd, a), func(t *testing.T) {
				d := dest(a, 42, tc.fwd)
				// What the encoder writes is what the library reads.
				if got := ipvs.ForwardType(fwdMethod(tc.fwd)); got != tc.kern {
					t.Errorf("fwdMethod(%s) = %v, want %v", tc.fwd, got, tc.kern)
				}
				wantFam := ipvs.INET
				if d.Addr.Addr().Is6() {
					wantFam = ipvs.INET6
				}
				k := ipvs.Destination{Address: d.Addr.Addr(), Port: d.Addr.Port(), Family: wantFam, FwdMethod: ipvs.ForwardType(fwdMethod(tc.fwd)), Weight: 42}
				if back := fromIPVSDest(k, wantFam); back != d {
					t.Errorf("round trip %v, want %v", back, d)
				}
			})
		}
	}
	t.Run("old kernel without dest family", func(t *testing.T) {
		k := ipvs.Destination{Address: netip.AddrFrom16([16]byte{10, 0, 0, 1}), Port: 53, FwdMethod: ipvs.DirectRoute, Weight: 1}
		if got := fromIPVSDest(k, ipvs.INET); got != dest("10.0.0.1:53", 1, DirectRoute) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("bypass never matches", func(t *testing.T) {
		got := fromIPVSDest(ipvs.Destination{Address: netip.MustParseAddr("10.0.0.1"), Family: ipvs.INET, FwdMethod: ipvs.Bypass}, ipvs.INET)
		for _, f := range []Forwarding{DirectRoute, NAT, Tunnel} {
			if destEqual(got, Destination{Addr: got.Addr, Forwarding: f}) {
				t.Errorf("bypass matched %s", f)
			}
		}
	})
}

func TestKernelErr(t *testing.T) {
	esrch := fmt.Errorf("netlink receive: %w", syscall.ESRCH)
	tests := []struct {
		name     string
		in       error
		notExist bool
		exist    bool
	}{
		{"nil", nil, false, false},
		{"esrch is not-exist", esrch, true, false},
		{"enoent is not-exist", syscall.ENOENT, true, false},
		{"eexist", syscall.EEXIST, false, true},
		{"other", syscall.EINVAL, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := kernelErr(tc.in)
			if (got == nil) != (tc.in == nil) {
				t.Fatalf("kernelErr(%v) = %v", tc.in, got)
			}
			if errors.Is(got, os.ErrNotExist) != tc.notExist || errors.Is(got, os.ErrExist) != tc.exist {
				t.Errorf("kernelErr(%v) = %v: notExist %v exist %v", tc.in, got, errors.Is(got, os.ErrNotExist), errors.Is(got, os.ErrExist))
			}
			if got != nil && got.Error() != tc.in.Error() {
				t.Errorf("text changed: %q", got)
			}
		})
	}
	if !errors.Is(kernelErr(esrch), syscall.ESRCH) {
		t.Error("errno lost")
	}
}

func TestNewKernelClientUnavailable(t *testing.T) {
	k, err := NewKernelClient()
	if err == nil {
		k.Close()
		t.Skip("this kernel has IPVS and we may use it; the VM tests cover the client")
	}
	if !errors.Is(err, ErrIPVSUnavailable) {
		t.Errorf("error %v does not wrap ErrIPVSUnavailable", err)
	}
	for _, s := range []string{"modprobe ip_vs", "CAP_NET_ADMIN", "-dry-run"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestWriteBoolSysctl(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "expire_nodest_conn")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			if err := writeBoolSysctl(p, on); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			want := map[bool]string{true: "1\n", false: "0\n"}[on]
			if string(b) != want {
				t.Errorf("file holds %q, want %q", b, want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		err := writeBoolSysctl(filepath.Join(dir, "nope"), true)
		if !errors.Is(err, ErrIPVSUnavailable) || !strings.Contains(err.Error(), "modprobe ip_vs") {
			t.Errorf("err %v", err)
		}
		if _, serr := os.Stat(filepath.Join(dir, "nope")); serr == nil {
			t.Error("created the missing file")
		}
	})
}

func TestSetUDPTimeoutRejects(t *testing.T) {
	for _, d := range []time.Duration{0, 500 * time.Millisecond, -time.Second} {
		if err := SetUDPTimeout(&KernelClient{}, d); err == nil {
			t.Errorf("SetUDPTimeout(%s) accepted", d)
		}
	}
}

func TestHostAddr(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"192.0.2.1/32", "192.0.2.1", false},
		{"2001:db8::1/128", "2001:db8::1", false},
		{"192.0.2.0/24", "", true},
		{"2001:db8::/64", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := hostAddr(netip.MustParsePrefix(tc.in))
			if (err != nil) != tc.wantErr || (!tc.wantErr && got.String() != tc.want) {
				t.Errorf("hostAddr = %v, %v", got, err)
			}
		})
	}
	if _, err := hostAddr(netip.Prefix{}); err == nil {
		t.Error("invalid prefix accepted")
	}
}
