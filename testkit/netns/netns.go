// Package netns is a test harness for hosts in Linux network namespaces.
// Each Host is a fresh namespace joined to the test's own (root) namespace
// by a veth pair, with an IPv4 address from the benchmarking range
// 198.18.0.0/15 and an IPv6 address from the ULA prefix fd00:18::/48, both
// unique per Host, also across test binaries running at the same time.
// Tests run real servers inside a Host (Listen, ListenPacket, Run, Command)
// and break them for real: the link goes down (LinkDown), packets are lost
// or delayed (Netem), or a port's traffic is dropped (Drop, with nftables).
//
// Creating hosts needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2,
// tc and, for Drop, nft. Without them New skips the test, or fails it when
// LBDNS_REQUIRE_NETNS=1 (as in CI). Everything a Host creates is removed
// by t.Cleanup when the test ends, also when it fails.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// EnvRequire names the environment variable that, set to "1", turns the
// skip of a test that cannot create namespaces into a failure.
const EnvRequire = "LBDNS_REQUIRE_NETNS"

// slots is the number of Host slots: each slot owns a /30 of
// 198.18.0.0/15 and a /64 of fd00:18::/48.
const slots = 1 << 15

// HostIf is the name of the Host's end of its veth pair, inside its
// namespace.
const HostIf = "eth0"

// Host is a network namespace joined to the root namespace by a veth pair.
// Its methods are safe for concurrent use.
type Host struct {
	t    testing.TB
	name string // namespace name, under /run/netns
	root string // root-side veth name
	slot int

	mu    sync.Mutex
	drops []drop       // ports dropped by Drop
	froms []netip.Addr // sources dropped by DropFrom
	loss  float64      // loss in % made by nftables when the kernel lacks netem
}

// drop is one (protocol, port) whose incoming traffic is dropped.
type drop struct {
	proto string
	port  uint16
}

// Available reports why namespaces cannot be created here, or nil when
// they can.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces")
	}
	for _, c := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("netns: %s not found (install iproute2): %w", c, err)
		}
	}
	return nil
}

// Require skips t, or fails it when LBDNS_REQUIRE_NETNS=1, unless
// network namespaces can be created here.
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		return
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%v (%s=1)", err, EnvRequire)
	}
	t.Skipf("%v; skipping (set %s=1 to fail instead)", err, EnvRequire)
}

// New creates a Host for t, named after name (letters, digits and '-'
// keep names readable in `ip netns`), and removes it when t ends. It
// skips t (or fails it, see Require) when namespaces cannot be created.
func New(t testing.TB, name string) *Host {
	t.Helper()
	Require(t)
	h := &Host{t: t}
	start := rand.IntN(slots)
	var lastErr error
	for i := range 64 {
		slot := (start + i*7919) % slots
		root := "lbn" + strconv.Itoa(slot) + "r"
		peer := "lbn" + strconv.Itoa(slot) + "h"
		// Creating the root-side link claims the slot: the kernel refuses
		// a second link of the same name, also from another process.
		if _, err := run("ip", "link", "add", root, "type", "veth", "peer", "name", peer); err != nil {
			lastErr = err
			continue
		}
		h.slot, h.root = slot, root
		h.name = "lbn" + strconv.Itoa(slot) + "-" + sanitize(name)
		t.Cleanup(h.destroy)
		if err := h.setup(peer); err != nil {
			t.Fatalf("netns: host %s: %v", h.name, err)
		}
		return h
	}
	t.Fatalf("netns: no free host slot after 64 tries: %v", lastErr)
	return nil
}

// sanitize keeps a name usable in a namespace name.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

// setup creates the namespace, moves the peer into it and addresses both
// ends.
func (h *Host) setup(peer string) error {
	// A namespace of this name can only be left over from a crashed run
	// that held the same slot.
	_, _ = run("ip", "netns", "del", h.name)
	steps := [][]string{
		{"ip", "netns", "add", h.name},
		{"ip", "link", "set", peer, "netns", h.name},
		{"ip", "-n", h.name, "link", "set", peer, "name", HostIf},
		{"ip", "-n", h.name, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	// Should the root end ever go down, its connected routes go with it:
	// these blackhole routes, behind them, keep packets for the Host from
	// leaving by the default route.
	for _, r := range h.blackholes() {
		if _, err := run("ip", append([]string{r[0], "route", "replace", "blackhole"}, r[1:]...)...); err != nil {
			return err
		}
	}
	// Keep static IPv6 addresses when the link goes down and comes back.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+h.root+"/keep_addr_on_down", []byte("1"), 0o644)
	_, _ = run("ip", "netns", "exec", h.name, "sysctl", "-q", "-w", "net.ipv6.conf."+HostIf+".keep_addr_on_down=1")
	return h.configure()
}

// configure brings both ends up with their addresses and the Host's
// default routes; it is idempotent.
func (h *Host) configure() error {
	gw4, gw6 := h.RootAddrV4(), h.RootAddrV6()
	steps := [][]string{
		{"ip", "addr", "replace", gw4.String() + "/30", "dev", h.root},
		{"ip", "addr", "replace", gw6.String() + "/64", "dev", h.root, "nodad"},
		{"ip", "link", "set", h.root, "up"},
		{"ip", "-n", h.name, "addr", "replace", h.AddrV4().String() + "/30", "dev", HostIf},
		{"ip", "-n", h.name, "addr", "replace", h.AddrV6().String() + "/64", "dev", HostIf, "nodad"},
		{"ip", "-n", h.name, "link", "set", HostIf, "up"},
		{"ip", "-n", h.name, "route", "replace", "default", "via", gw4.String(), "dev", HostIf},
		{"ip", "-n", h.name, "-6", "route", "replace", "default", "via", gw6.String(), "dev", HostIf},
		// Resolutions begun while the link was down would wait for their
		// next retransmission (a second): start afresh.
		{"ip", "neigh", "flush", "dev", h.root},
		{"ip", "-n", h.name, "neigh", "flush", "dev", HostIf},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return h.waitUp()
}

// waitUp waits until both ends of the link are operationally up: until
// the kernel's link watcher has seen the carrier, a veth drops what it is
// given, which a TCP handshake survives by retrying but a UDP or ICMP
// probe does not.
func (h *Host) waitUp() error {
	const tries, pause = 250, 20 * time.Millisecond
	var root, host []byte
	for range tries {
		var err error
		if root, err = run("ip", "-o", "link", "show", "dev", h.root); err != nil {
			return err
		}
		if host, err = run("ip", "-n", h.name, "-o", "link", "show", "dev", HostIf); err != nil {
			return err
		}
		if bytes.Contains(root, []byte(" state UP ")) && bytes.Contains(host, []byte(" state UP ")) {
			return nil
		}
		time.Sleep(pause)
	}
	return fmt.Errorf("link not up after %v: %s / %s", tries*pause, bytes.TrimSpace(root), bytes.TrimSpace(host))
}

// destroy removes the namespace and the root-side link.
func (h *Host) destroy() {
	if _, err := run("ip", "netns", "del", h.name); err != nil {
		h.t.Errorf("netns: cleanup: %v", err)
	}
	// Deleting the namespace deletes the pair; this catches a pair whose
	// peer never moved.
	_, _ = run("ip", "link", "del", h.root)
	for _, r := range h.blackholes() {
		if _, err := run("ip", append([]string{r[0], "route", "del", "blackhole"}, r[1:]...)...); err != nil && !strings.Contains(err.Error(), "No such process") {
			h.t.Errorf("netns: cleanup: %v", err)
		}
	}
}

// blackholes returns the family flag and the rest of the arguments of the
// root namespace's blackhole routes for the Host's prefixes.
func (h *Host) blackholes() [][]string {
	return [][]string{
		{"-4", netip.PrefixFrom(h.AddrV4(), 30).Masked().String(), "metric", "4000"},
		{"-6", netip.PrefixFrom(h.AddrV6(), 64).Masked().String(), "metric", "4000"},
	}
}

// Name returns the namespace's name (as in `ip netns list`).
func (h *Host) Name() string { return h.name }

// RootIf returns the name of the veth end in the root namespace.
func (h *Host) RootIf() string { return h.root }

// AddrV4 returns the Host's IPv4 address, in 198.18.0.0/15.
func (h *Host) AddrV4() netip.Addr { return h.v4(2) }

// RootAddrV4 returns the root namespace's IPv4 address on the link to the
// Host (the Host's default gateway).
func (h *Host) RootAddrV4() netip.Addr { return h.v4(1) }

// AddrV6 returns the Host's IPv6 address, in fd00:18::/48.
func (h *Host) AddrV6() netip.Addr { return h.v6(2) }

// RootAddrV6 returns the root namespace's IPv6 address on the link to the
// Host (the Host's IPv6 default gateway).
func (h *Host) RootAddrV6() netip.Addr { return h.v6(1) }

func (h *Host) v4(n int) netip.Addr {
	v := uint32(198)<<24 | uint32(18)<<16 | uint32(h.slot)<<2 | uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (h *Host) v6(n int) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfd, 0x00, 0x00, 0x18, 0, 0, byte(h.slot >> 8), byte(h.slot), 15: byte(n)})
}

// Run calls fn on an OS thread switched into the Host's namespace, and
// returns its error. Sockets created by fn stay in the namespace after
// Run returns; fn must not start goroutines that expect to inherit the
// namespace (they run on other threads).
func (h *Host) Run(fn func() error) error {
	target, err := unix.Open("/run/netns/"+h.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: open %s: %w", h.name, err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	// A fresh goroutine owns the locked thread: if switching back fails,
	// the goroutine exits still locked and the runtime discards the thread
	// instead of reusing it in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: open own namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %w", h.name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", h.name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen is net.Listen inside the Host; the listener is closed when the
// test ends (closing it earlier is fine).
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := h.Run(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: %s: listen %s %s: %w", h.name, network, addr, err)
	}
	h.t.Cleanup(func() { _ = l.Close() })
	return l, nil
}

// ListenPacket is net.ListenPacket inside the Host; the connection is
// closed when the test ends (closing it earlier is fine).
func (h *Host) ListenPacket(network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := h.Run(func() (err error) {
		c, err = net.ListenPacket(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: %s: listen %s %s: %w", h.name, network, addr, err)
	}
	h.t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

// Command returns a command that runs name inside the Host (through
// `ip netns exec`). A command started and still running when the test
// ends is killed and waited for.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.name, name}, args...)...)
	h.t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// LinkDown sets the Host's end of its link down, as if its cable was
// pulled: the root end stays up without a carrier, so packets to the Host
// are dropped without an answer and senders see timeouts.
func (h *Host) LinkDown() {
	h.t.Helper()
	if _, err := run("ip", "-n", h.name, "link", "set", HostIf, "down"); err != nil {
		h.t.Fatalf("netns: %v", err)
	}
}

// LinkUp brings the Host's link back after LinkDown, with its addresses
// and routes.
func (h *Host) LinkUp() {
	h.t.Helper()
	if err := h.configure(); err != nil {
		h.t.Fatalf("netns: %v", err)
	}
}

// Netem makes the Host's link lose lossPercent of the packets sent to the
// Host and delay the others by delay, with tc netem on the root end; a
// later call replaces the earlier one. On a kernel without sch_netem the
// loss is made by an nftables rule inside the Host instead (random drop
// on input), and a delay cannot be made: the test is skipped, saying so.
func (h *Host) Netem(lossPercent float64, delay time.Duration) {
	h.t.Helper()
	if lossPercent < 0 || lossPercent > 100 {
		h.t.Fatalf("netns: netem: loss %v%% outside 0-100", lossPercent)
	}
	args := []string{"qdisc", "replace", "dev", h.root, "root", "netem"}
	if lossPercent > 0 {
		args = append(args, "loss", strconv.FormatFloat(lossPercent, 'f', -1, 64)+"%")
	}
	if delay > 0 {
		args = append(args, "delay", strconv.FormatInt(delay.Microseconds(), 10)+"us")
	}
	_, err := run("tc", args...)
	if err == nil {
		return
	}
	if !strings.Contains(err.Error(), "qdisc kind is unknown") {
		h.t.Fatalf("netns: netem: %v", err)
	}
	if delay > 0 {
		h.t.Skipf("netns: the kernel has no sch_netem (tc netem), so no delay can be made: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loss = lossPercent
	h.applyNft()
}

// ClearNetem removes what Netem set.
func (h *Host) ClearNetem() {
	h.t.Helper()
	if _, err := run("tc", "qdisc", "del", "dev", h.root, "root"); err != nil &&
		!strings.Contains(err.Error(), "No such file") && !strings.Contains(err.Error(), "Cannot delete qdisc with handle of zero") {
		h.t.Fatalf("netns: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loss != 0 {
		h.loss = 0
		h.applyNft()
	}
}

// Drop silently drops packets of proto ("tcp" or "udp") arriving at the
// Host on port, with nftables inside the Host: senders see no reply and
// no reset, only a timeout. It fails the test when nft is missing.
func (h *Host) Drop(proto string, port uint16) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	d := drop{proto, port}
	if !slices.Contains(h.drops, d) {
		h.drops = append(h.drops, d)
	}
	h.applyNft()
}

// Undrop ends a Drop of proto and port.
func (h *Host) Undrop(proto string, port uint16) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drops = slices.DeleteFunc(h.drops, func(d drop) bool { return d == drop{proto, port} })
	h.applyNft()
}

// DropFrom silently drops every packet arriving at the Host from addr,
// with nftables inside the Host: the Host is cut off from addr (what it
// sends gets no reply, what addr sends is lost) while the rest of its
// link works. It fails the test when nft is missing.
func (h *Host) DropFrom(addr netip.Addr) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.froms, addr) {
		h.froms = append(h.froms, addr)
	}
	h.applyNft()
}

// UndropFrom ends a DropFrom of addr.
func (h *Host) UndropFrom(addr netip.Addr) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.froms = slices.DeleteFunc(h.froms, func(a netip.Addr) bool { return a == addr })
	h.applyNft()
}

// Forward lets the root namespace route what the Host sends to the other
// Hosts that Forward too: IPv4 forwarding on the root end of the Host's
// link only (the kernel decides by the interface a packet came in on),
// so the rest of the machine forwards nothing. The link's removal at the
// end of the test removes the setting.
func (h *Host) Forward() {
	h.t.Helper()
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+h.root+"/forwarding", []byte("1"), 0o644); err != nil {
		h.t.Fatalf("netns: forward: %v", err)
	}
}

// applyNft replaces the Host's nftables table with one rule per drop and
// one for the loss.
func (h *Host) applyNft() {
	h.t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		h.t.Fatalf("netns: nft not found (install nftables, see scripts/install-test-deps.sh): %v", err)
	}
	var b strings.Builder
	b.WriteString("table inet lbdns_netns\ndelete table inet lbdns_netns\n")
	b.WriteString("table inet lbdns_netns {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n")
	switch {
	case h.loss >= 100:
		b.WriteString("\t\tdrop\n")
	case h.loss > 0:
		fmt.Fprintf(&b, "\t\tnumgen random mod 10000 < %d drop\n", int(h.loss*100+0.5))
	}
	for _, d := range h.drops {
		if d.proto != "tcp" && d.proto != "udp" {
			h.t.Fatalf("netns: drop: protocol %q is not tcp or udp", d.proto)
		}
		fmt.Fprintf(&b, "\t\t%s dport %d drop\n", d.proto, d.port)
	}
	for _, a := range h.froms {
		family := "ip"
		if a.Is6() {
			family = "ip6"
		}
		fmt.Fprintf(&b, "\t\t%s saddr %s drop\n", family, a)
	}
	b.WriteString("\t}\n}\n")
	cmd := exec.Command("ip", "netns", "exec", h.name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("netns: nft: %v: %s", err, bytes.TrimSpace(out))
	}
}

// run runs a command and returns its output, or an error that includes
// the command line and its output.
func run(name string, args ...string) ([]byte, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Link joins Host a (address aAddr on its interface aIf) and Host b
// (bAddr on bIf) by a second veth pair, both addresses in one /30; the
// pair goes with the namespaces when the test ends.
func Link(t testing.TB, a *Host, aIf, aAddr string, b *Host, bIf, bAddr string) {
	t.Helper()
	for _, s := range [][]string{
		{"-n", a.Name(), "link", "add", aIf, "type", "veth", "peer", "name", bIf, "netns", b.Name()},
		{"-n", a.Name(), "addr", "add", aAddr + "/30", "dev", aIf},
		{"-n", b.Name(), "addr", "add", bAddr + "/30", "dev", bIf},
		{"-n", a.Name(), "link", "set", aIf, "up"},
		{"-n", b.Name(), "link", "set", bIf, "up"},
	} {
		if _, err := run("ip", s...); err != nil {
			t.Fatalf("netns: %v", err)
		}
	}
}

// IP runs one ip command (ip ARGS...), failing the test on an error.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if _, err := run("ip", args...); err != nil {
		t.Fatalf("netns: %v", err)
	}
}

// Sysctl sets kv ("net.ipv4.ip_forward=1") inside the Host.
func (h *Host) Sysctl(kv string) {
	h.t.Helper()
	if _, err := run("ip", "netns", "exec", h.name, "sysctl", "-q", "-w", kv); err != nil {
		h.t.Fatalf("netns: %v", err)
	}
}

// FD returns an open descriptor of the Host's namespace (for netlink
// clients that take one, such as nftables.WithNetNSFd), closed when the
// test ends.
func (h *Host) FD() int {
	h.t.Helper()
	fd, err := unix.Open("/run/netns/"+h.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		h.t.Fatalf("netns: open %s: %v", h.name, err)
	}
	h.t.Cleanup(func() { unix.Close(fd) })
	return fd
}
