package vip

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/cloudflare/ipvs"
	"github.com/cloudflare/ipvs/netmask"
)

// unavailableHint tells the operator what to do when IPVS cannot be used.
const unavailableHint = "load the ip_vs module (modprobe ip_vs) and run as root or with CAP_NET_ADMIN, or start with -dry-run"

// The clients of this package are all Clients.
var (
	_ Client = (*KernelClient)(nil)
	_ Client = (*MemClient)(nil)

	_ BatchClient = (*KernelClient)(nil)
	_ BatchClient = (*MemClient)(nil)
)

// KernelClient is the Client of the running kernel's IPVS table, over
// generic netlink: reads through github.com/cloudflare/ipvs, writes through
// this package's one encoder of IPVS attributes (encodeOp), alone or in
// batches. Firewall-mark services are
// left out of Services: they have no address and port, so they are never
// owned. It is not safe for concurrent use.
type KernelClient struct {
	c ipvs.Client
	// batch is the socket of every write, alone or in a batch, opened at
	// its first use.
	batch *batchConn
}

// NewKernelClient connects to the kernel's IPVS. When IPVS is missing, the
// process lacks the privilege, or the platform is not Linux, the error wraps
// ErrIPVSUnavailable and says what to do.
func NewKernelClient() (*KernelClient, error) {
	c, err := ipvs.New()
	if err != nil {
		return nil, fmt.Errorf("%w: %w; %s", ErrIPVSUnavailable, err, unavailableHint)
	}
	// Every IPVS netlink command needs CAP_NET_ADMIN: find out now rather
	// than at the first change.
	if _, err := c.Info(); err != nil {
		if cl, ok := c.(io.Closer); ok {
			cl.Close()
		}
		return nil, fmt.Errorf("%w: %w; %s", ErrIPVSUnavailable, err, unavailableHint)
	}
	return &KernelClient{c: c}, nil
}

// Close closes the netlink connection.
func (k *KernelClient) Close() error {
	err := k.closeBatch()
	if cl, ok := k.c.(io.Closer); ok {
		return errors.Join(cl.Close(), err)
	}
	return err
}

// notExistError marks a kernel error (ESRCH: no such service) as
// os.ErrNotExist while keeping its text and its errno.
type notExistError struct{ err error }

func (e notExistError) Error() string        { return e.err.Error() }
func (e notExistError) Unwrap() error        { return e.err }
func (e notExistError) Is(target error) bool { return target == os.ErrNotExist }

// kernelErr translates the kernel's errors to the Client conventions: the
// kernel answers ESRCH for a missing service and ENOENT for a missing
// destination; both become os.ErrNotExist.
func kernelErr(err error) error {
	if err != nil && errors.Is(err, syscall.ESRCH) {
		return notExistError{err}
	}
	return err
}

// toIPVSService maps a service key and scheduler to the library's type,
// with the host netmask the kernel insists on.
func toIPVSService(k ServiceKey, sched string) ipvs.Service {
	a := k.Addr.Unmap()
	s := ipvs.Service{
		Address:   a,
		Port:      k.Port,
		Protocol:  ipvs.Protocol(k.Proto),
		Scheduler: sched,
		Family:    ipvs.INET,
		Netmask:   netmask.MaskFrom(32, 32),
	}
	if a.Is6() {
		s.Family = ipvs.INET6
		s.Netmask = netmask.MaskFrom(128, 128)
	}
	return s
}

// fromIPVSService maps a service from the kernel; ok is false for services
// a ServiceKey cannot name (firewall marks, unknown protocols).
func fromIPVSService(s ipvs.Service) (Service, bool) {
	if s.FWMark != 0 || s.Protocol > 0xff || !s.Address.IsValid() {
		return Service{}, false
	}
	addr := s.Address
	if s.Family == ipvs.INET && addr.Is6() {
		a := addr.As16()
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	return Service{
		Key:       ServiceKey{Addr: addr, Port: s.Port, Proto: Protocol(s.Protocol)},
		Scheduler: s.Scheduler,
	}, true
}

// fromIPVSDest maps a destination from the kernel. Old kernels do not
// report a destination's family; then a 4-byte address arrives padded to 16
// bytes, which svcFamily corrects.
func fromIPVSDest(d ipvs.Destination, svcFamily ipvs.AddressFamily) Destination {
	addr := d.Address
	if addr.Is6() && (d.Family == ipvs.INET || (d.Family == 0 && svcFamily == ipvs.INET)) {
		a := addr.As16()
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	var fwd Forwarding
	switch d.FwdMethod {
	case ipvs.DirectRoute:
		fwd = DirectRoute
	case ipvs.Masquerade:
		fwd = NAT
	case ipvs.Tunnel:
		fwd = Tunnel
	case ipvs.Local:
		fwd = Local
	default:
		fwd = Forwarding(0xff) // bypass or unknown: never matches a wanted method
	}
	return Destination{
		Addr:       netip.AddrPortFrom(addr, d.Port),
		Weight:     d.Weight,
		Forwarding: fwd,
	}
}

// Services implements Client.
func (k *KernelClient) Services() ([]Service, error) {
	svcs, err := k.c.Services()
	if err == os.ErrNotExist { // the library's answer for an empty table
		return []Service{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]Service, 0, len(svcs))
	for _, s := range svcs {
		if v, ok := fromIPVSService(s.Service); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// Destinations implements Client.
func (k *KernelClient) Destinations(key ServiceKey) ([]Destination, error) {
	svc := toIPVSService(key, "")
	ds, err := k.c.Destinations(svc)
	if err == os.ErrNotExist { // the library's answer for no destinations
		return []Destination{}, nil
	}
	if err != nil {
		return nil, kernelErr(err)
	}
	out := make([]Destination, 0, len(ds))
	for _, d := range ds {
		out = append(out, fromIPVSDest(d.Destination, svc.Family))
	}
	return out, nil
}

// The writes below go out one request each through encodeOp, the encoder
// ApplyBatch uses too (kernel_batch_linux.go); the library serves the
// reads (Services, Destinations, statistics) and the global settings.

// CreateService implements Client.
func (k *KernelClient) CreateService(s Service) error {
	return k.write(Op{Kind: CreateService, Service: s})
}

// UpdateService implements Client.
func (k *KernelClient) UpdateService(s Service) error {
	return k.write(Op{Kind: UpdateService, Service: s})
}

// DeleteService implements Client.
func (k *KernelClient) DeleteService(key ServiceKey) error {
	return k.write(Op{Kind: DeleteService, Service: Service{Key: key}})
}

// CreateDestination implements Client.
func (k *KernelClient) CreateDestination(key ServiceKey, d Destination) error {
	return k.write(Op{Kind: CreateDest, Service: Service{Key: key}, Dest: d})
}

// UpdateDestination implements Client.
func (k *KernelClient) UpdateDestination(key ServiceKey, d Destination) error {
	return k.write(Op{Kind: UpdateDest, Service: Service{Key: key}, Dest: d})
}

// DeleteDestination implements Client.
func (k *KernelClient) DeleteDestination(key ServiceKey, a netip.AddrPort) error {
	return k.write(Op{Kind: DeleteDest, Service: Service{Key: key}, Dest: Destination{Addr: a}})
}

// SetUDPTimeout sets the kernel's IPVS UDP connection timeout, keeping the
// TCP values. The kernel counts whole seconds; d is rounded up and must be
// at least one second.
func SetUDPTimeout(c *KernelClient, d time.Duration) error {
	if d < time.Second {
		return fmt.Errorf("vip: set udp timeout: %s is below one second", d)
	}
	secs := (d + time.Second - 1) / time.Second
	if secs > 1<<31-1 {
		return fmt.Errorf("vip: set udp timeout: %s is too long", d)
	}
	cfg, err := c.c.Config()
	if err != nil {
		return fmt.Errorf("vip: set udp timeout: read config: %w", err)
	}
	cfg.UDPTimeout = uint32(secs)
	if err := c.c.SetConfig(cfg); err != nil {
		return fmt.Errorf("vip: set udp timeout: %w", err)
	}
	return nil
}

// expireNodestConnPath is the sysctl SetExpireNodestConn writes.
const expireNodestConnPath = "/proc/sys/net/ipv4/vs/expire_nodest_conn"

// SetExpireNodestConn turns the kernel's expire_nodest_conn on or off. On,
// the kernel drops a connection entry as soon as its destination is
// deleted, so clients of a removed resolver move on at once instead of
// timing out.
func SetExpireNodestConn(on bool) error {
	return writeBoolSysctl(expireNodestConnPath, on)
}

// writeBoolSysctl writes "1" or "0" to an existing sysctl file.
func writeBoolSysctl(path string, on bool) error {
	v := []byte("0\n")
	if on {
		v = []byte("1\n")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vip: set %s: %w: %w; %s", path, ErrIPVSUnavailable, err, unavailableHint)
	}
	if err != nil {
		return fmt.Errorf("vip: set %s: %w", path, err)
	}
	if _, err := f.Write(v); err != nil {
		f.Close()
		return fmt.Errorf("vip: set %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vip: set %s: %w", path, err)
	}
	return nil
}
