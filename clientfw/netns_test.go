package clientfw_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"lbdns/clientfw"
	"lbdns/intent"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
)

// vip and vip6 are the addresses the LB namespace answers DNS on.
var (
	vip  = netip.MustParseAddrPort("192.0.2.53:53")
	vip6 = netip.MustParseAddrPort("[2001:db8::53]:53")
)

// lab is an LB namespace with a UDP DNS listener on the VIP, and two
// client namespaces, each on its own veth pair to it.
type lab struct {
	t      *testing.T
	lb     *netns.Host
	c1, c2 *netns.Host
	fd     int // the LB namespace, open

	mu   sync.Mutex
	seen map[netip.Addr]int // queries the listener answered, by source
}

const (
	c1Addr6 = "fd00:53:1::2"
	c1Addr  = "10.0.1.2"
	c2Addr  = "10.0.2.2"
	table   = "lbdns_test"
)

func newLab(t *testing.T) *lab {
	l := &lab{t: t, lb: netns.New(t, "fw-lb"), c1: netns.New(t, "fw-c1"), c2: netns.New(t, "fw-c2"), seen: map[netip.Addr]int{}}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft not found (install nftables, see scripts/install-test-deps.sh): %v", err)
	}
	netns.Link(t, l.lb, "c1", "10.0.1.1", l.c1, "eth1", c1Addr)
	netns.Link(t, l.lb, "c2", "10.0.2.1", l.c2, "eth1", c2Addr)
	netns.IP(t, "-n", l.lb.Name(), "addr", "add", vip.Addr().String()+"/32", "dev", "lo")
	netns.IP(t, "-n", l.c1.Name(), "route", "replace", vip.Addr().String()+"/32", "via", "10.0.1.1")
	netns.IP(t, "-n", l.c2.Name(), "route", "replace", vip.Addr().String()+"/32", "via", "10.0.2.1")
	// Client 1 speaks IPv6 too.
	netns.IP(t, "-n", l.lb.Name(), "addr", "add", "fd00:53:1::1/64", "dev", "c1", "nodad")
	netns.IP(t, "-n", l.c1.Name(), "addr", "add", c1Addr6+"/64", "dev", "eth1", "nodad")
	netns.IP(t, "-n", l.lb.Name(), "addr", "add", vip6.Addr().String()+"/128", "dev", "lo")
	netns.IP(t, "-n", l.c1.Name(), "-6", "route", "replace", vip6.Addr().String()+"/128", "via", "fd00:53:1::1")
	for _, a := range []netip.AddrPort{vip, vip6} {
		pc, err := l.lb.ListenPacket("udp", a.String())
		if err != nil {
			t.Fatal(err)
		}
		go l.serve(pc)
	}
	l.fd = l.lb.FD()
	return l
}

// serve answers every DNS query it reads, counting them by source.
func (l *lab) serve(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var q dns.Msg
		if q.Unpack(buf[:n]) != nil {
			continue
		}
		l.mu.Lock()
		l.seen[from.(*net.UDPAddr).AddrPort().Addr().Unmap()]++
		l.mu.Unlock()
		r := new(dns.Msg).SetReply(&q)
		r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)})
		if b, err := r.Pack(); err == nil {
			_, _ = pc.WriteTo(b, from)
		}
	}
}

// answered sends n queries from host, one after the other, each waiting
// up to wait for its answer, and returns how many were answered.
func (l *lab) answered(host *netns.Host, n int, wait time.Duration) int {
	l.t.Helper()
	return l.answeredAt(host, vip, n, wait)
}

// answeredAt is answered, the queries sent to to.
func (l *lab) answeredAt(host *netns.Host, to netip.AddrPort, n int, wait time.Duration) int {
	l.t.Helper()
	return l.exchange(host, "udp", ":0", to, n, wait)
}

// exchange sends n queries from host over network, from the local
// address from, to to, one after the other, each waiting up to wait for
// its answer, and returns how many were answered.
func (l *lab) exchange(host *netns.Host, network, from string, to netip.AddrPort, n int, wait time.Duration) int {
	l.t.Helper()
	pc, err := host.ListenPacket(network, from)
	if err != nil {
		l.t.Fatal(err)
	}
	defer pc.Close()
	got := 0
	buf := make([]byte, 1500)
	for i := range n {
		q := new(dns.Msg).SetQuestion("flood.example.", dns.TypeA)
		q.Id = uint16(i + 1)
		b, _ := q.Pack()
		if _, err := pc.WriteTo(b, net.UDPAddrFromAddrPort(to)); err != nil {
			l.t.Fatal(err)
		}
		_ = pc.SetReadDeadline(time.Now().Add(wait))
		for {
			m, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			var r dns.Msg
			if r.Unpack(buf[:m]) == nil && r.Id == q.Id {
				got++
				break
			}
		}
	}
	return got
}

// paced sends n queries from host, one every gap, then reads answers
// until a second after the last, and returns how many came back and how
// long the sending took.
func (l *lab) paced(host *netns.Host, n int, gap time.Duration) (int, time.Duration) {
	l.t.Helper()
	pc, err := host.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		l.t.Fatal(err)
	}
	defer pc.Close()
	var mu sync.Mutex
	got := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_ = pc.SetReadDeadline(time.Now().Add(time.Duration(n)*gap + time.Second))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			mu.Lock()
			got++
			mu.Unlock()
		}
	}()
	start := time.Now()
	for i := range n {
		time.Sleep(gap)
		q := new(dns.Msg).SetQuestion("flood.example.", dns.TypeA)
		q.Id = uint16(i + 1)
		b, _ := q.Pack()
		if _, err := pc.WriteTo(b, net.UDPAddrFromAddrPort(vip)); err != nil {
			l.t.Error(err)
			break
		}
	}
	took := time.Since(start)
	<-done
	mu.Lock()
	defer mu.Unlock()
	return got, took
}

// nft runs nft inside the LB namespace and returns its output.
func (l *lab) nft(args ...string) (string, error) {
	out, err := l.lb.Command("nft", args...).CombinedOutput()
	return string(out), err
}

func action(kind, client string, rate int, until time.Time) intent.ClientAction {
	return intent.ClientAction{Client: netip.MustParsePrefix(client), Action: kind, Rate: rate, Until: until, Reason: "test", Set: time.Now()}
}

// TestEnforceInNamespace: in a namespace the test made, a block drops
// the blocked client's queries before they reach the listener on the
// VIP while the other client's are answered; a limit lets about its rate
// through; the rule goes at unblock and, on its own in the kernel, at
// its expiry; a new enforcer (a restart) removes an element the intent
// does not hold.
func TestEnforceInNamespace(t *testing.T) {
	l := newLab(t)
	enf := clientfw.New(clientfw.Options{Table: table, NetNS: l.fd})
	// Someone else's table, which lbdnsd must leave alone.
	for _, cmd := range [][]string{{"add", "table", "inet", "other"}, {"add", "chain", "inet", "other", "input", "{ type filter hook input priority 0; policy accept; }"},
		{"add", "rule", "inet", "other", "input", "tcp", "dport", "22", "counter", "accept"}} {
		if out, err := l.nft(cmd...); err != nil {
			t.Fatalf("nft %v: %v: %s", cmd, err, out)
		}
	}
	if got := l.answered(l.c1, 5, time.Second); got != 5 {
		t.Fatalf("before any action, client 1 got %d of 5 answers", got)
	}

	hour := time.Now().Add(time.Hour)
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, hour)}); err != nil {
		t.Fatal(err)
	}
	out, err := l.nft("list", "table", "inet", table)
	if err != nil || !strings.Contains(out, c1Addr) || !strings.Contains(out, "hook prerouting priority raw") || !strings.Contains(out, "expires") {
		t.Fatalf("nft list table after block: %v\n%s", err, out)
	}
	l.mu.Lock()
	before := l.seen[netip.MustParseAddr(c1Addr)]
	l.mu.Unlock()
	if got := l.answered(l.c1, 5, 300*time.Millisecond); got != 0 {
		t.Errorf("blocked client 1 got %d of 5 answers", got)
	}
	l.mu.Lock()
	reached := l.seen[netip.MustParseAddr(c1Addr)] - before
	l.mu.Unlock()
	if reached != 0 {
		t.Errorf("%d of the blocked client's queries reached the listener", reached)
	}
	if got := l.answered(l.c2, 5, time.Second); got != 5 {
		t.Errorf("client 2, not blocked, got %d of 5 answers", got)
	}
	st := enf.Status()
	if !st.Enforced || st.Block != 1 || st.Limit != 0 {
		t.Errorf("status %+v", st)
	}
	if got := l.answeredAt(l.c1, vip6, 3, time.Second); got != 3 {
		t.Errorf("client 1 over IPv6, not blocked, got %d of 3 answers", got)
	}

	// IPv6: client 1's /64 blocked, its IPv4 address not.
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionBlock, "fd00:53:1::/64", 0, hour)}); err != nil {
		t.Fatal(err)
	}
	if got := l.answeredAt(l.c1, vip6, 3, 300*time.Millisecond); got != 0 {
		t.Errorf("client 1 over IPv6, its /64 blocked, got %d of 3 answers", got)
	}
	if got := l.answered(l.c1, 3, time.Second); got != 3 {
		t.Errorf("client 1 over IPv4, only its IPv6 /64 blocked, got %d of 3 answers", got)
	}

	// Limit client 2 to 20/s; client 1's block is lifted by the change
	// of intent.
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionLimit, "10.0.2.0/30", 20, hour)}); err != nil {
		t.Fatal(err)
	}
	// 200 queries at about 100/s: 20/s of the time they took, plus the
	// limit's burst of 5, get through (one second's worth either way
	// for the bucket's start and the last packets' timing).
	got, took := l.paced(l.c2, 200, 10*time.Millisecond)
	if hi := int(20*took.Seconds()) + 5 + 20; got < int(20*took.Seconds())-20 || got > hi {
		t.Errorf("client 2 limited to 20/s sent 200 queries in %v and got %d answers, want about %d", took, got, int(20*took.Seconds())+5)
	} else {
		t.Logf("limited to 20/s: 200 queries in %v, %d answered", took.Round(time.Millisecond), got)
	}
	if got := l.answered(l.c1, 5, time.Second); got != 5 {
		t.Errorf("client 1, no longer blocked, got %d of 5 answers", got)
	}

	// Unblock: no action left, no table left.
	if _, err := enf.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if out, err := l.nft("list", "table", "inet", table); err == nil {
		t.Errorf("the table is still there after the last action went:\n%s", out)
	}
	if got := l.answered(l.c2, 5, time.Second); got != 5 {
		t.Errorf("client 2, unlimited, got %d of 5 answers", got)
	}

	// Expiry: the kernel drops the element on its own, no Apply needed.
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, time.Now().Add(2*time.Second))}); err != nil {
		t.Fatal(err)
	}
	if got := l.answered(l.c1, 2, 300*time.Millisecond); got != 0 {
		t.Errorf("client 1 blocked for 2s got %d of 2 answers", got)
	}
	deadline := time.Now().Add(6 * time.Second)
	for l.answered(l.c1, 1, 200*time.Millisecond) != 1 {
		if time.Now().After(deadline) {
			out, _ := l.nft("list", "table", "inet", table)
			t.Fatalf("client 1 still blocked 6s after a 2s block:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, _ := l.nft("list", "set", "inet", table, "block4"); strings.Contains(out, c1Addr) {
		t.Errorf("the expired element is still listed:\n%s", out)
	}

	// A restart reconciles: an element added by hand, which the intent
	// does not hold, is removed; the intent's stays.
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, hour)}); err != nil {
		t.Fatal(err)
	}
	if out, err := l.nft("add", "element", "inet", table, "block4", "{ "+c2Addr+" timeout 1h }"); err != nil {
		t.Fatalf("nft add element: %v: %s", err, out)
	}
	if got := l.answered(l.c2, 2, 300*time.Millisecond); got != 0 {
		t.Fatalf("client 2, blocked by hand, got %d of 2 answers", got)
	}
	again := clientfw.New(clientfw.Options{Table: table, NetNS: l.fd})
	wrote, err := again.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, hour)})
	if err != nil || !wrote {
		t.Fatalf("reconcile after a restart: wrote %v, %v", wrote, err)
	}
	if got := l.answered(l.c2, 5, time.Second); got != 5 {
		t.Errorf("client 2, whose element the intent does not hold, got %d of 5 answers after the reconcile", got)
	}
	if got := l.answered(l.c1, 2, 300*time.Millisecond); got != 0 {
		t.Errorf("client 1, blocked by the intent, got %d of 2 answers after the reconcile", got)
	}
	if wrote, err := again.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, hour)}); err != nil || wrote {
		t.Errorf("a second Apply of the same intent wrote %v (%v), want nothing written", wrote, err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
	if out, err := l.nft("list", "table", "inet", "other"); err != nil || !strings.Contains(out, "tcp dport 22 counter") {
		t.Errorf("the other table after lbdnsd's reconciles and removal: %v\n%s", err, out)
	}
}

// answeredFrom is answered, the queries sent from the local address
// from of host.
func (l *lab) answeredFrom(host *netns.Host, from string, n int, wait time.Duration) int {
	l.t.Helper()
	return l.exchange(host, "udp4", from+":0", vip, n, wait)
}

// TestLimitFullMeterFailsClosed: once a limit's meter is full of
// sources (here 2), a new source of the limited clients is dropped
// whole, not let through unlimited; the sources in the meter keep their
// rate; a source outside the limited clients is not touched.
func TestLimitFullMeterFailsClosed(t *testing.T) {
	l := newLab(t)
	// Two more sources of client 2's /24, routed back through it.
	netns.IP(t, "-n", l.c2.Name(), "addr", "add", "10.0.2.65/32", "dev", "eth1")
	netns.IP(t, "-n", l.c2.Name(), "addr", "add", "10.0.2.66/32", "dev", "eth1")
	netns.IP(t, "-n", l.lb.Name(), "route", "add", "10.0.2.64/26", "via", c2Addr)
	enf := clientfw.New(clientfw.Options{Table: table, NetNS: l.fd, MeterSize: 2})
	limit := []intent.ClientAction{action(intent.ActionLimit, "10.0.2.0/24", 50, time.Now().Add(time.Hour))}
	if _, err := enf.Apply(limit); err != nil {
		t.Fatal(err)
	}
	// Two sources fill the meter, each under its rate.
	for _, src := range []string{c2Addr, "10.0.2.65"} {
		if got := l.answeredFrom(l.c2, src, 3, time.Second); got != 3 {
			t.Fatalf("%s, under the limit, got %d of 3 answers", src, got)
		}
	}
	// A third source of the limited /24: the meter is full, so it is
	// dropped rather than let through without a limit.
	if got := l.answeredFrom(l.c2, "10.0.2.66", 5, 300*time.Millisecond); got != 0 {
		t.Errorf("a new source with the meter full got %d of 5 answers, want 0 (fail closed)", got)
	}
	if got := l.answeredFrom(l.c2, c2Addr, 3, time.Second); got != 3 {
		t.Errorf("a source in the meter, under the limit, got %d of 3 answers", got)
	}
	if got := l.answered(l.c1, 3, time.Second); got != 3 {
		t.Errorf("client 1, not limited, got %d of 3 answers", got)
	}
	// The meter's fill as counted from the kernel: its two sources, of
	// two.
	if err := enf.Measure(); err != nil {
		t.Fatal(err)
	}
	if got := fill(enf.Status().Fill); got != "block4 0, block6 0, limit4_50 1, meter4_50 2 of 2" {
		t.Errorf("fill %q, want the meter full with its 2 sources", got)
	}
	a, err := enf.Read()
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := clientfw.Same(clientfw.Desired(limit, time.Now()), a); !ok {
		t.Errorf("the table read back differs from the intent: %s", why)
	}
}

// fill writes f as "SET N[ of CAP], ...".
func fill(f []clientfw.SetFill) string {
	var out []string
	for _, s := range f {
		w := fmt.Sprintf("%s %d", s.Set, s.Elements)
		if s.Capacity > 0 {
			w += fmt.Sprintf(" of %d", s.Capacity)
		}
		out = append(out, w)
	}
	return strings.Join(out, ", ")
}

// TestMeterFillCounted: a meter of the default size filled with 65,535
// sources is counted whole from the kernel (every element dumped), a
// fresh write of the table starts it at 0, and a table without a limit
// is counted without asking the kernel. The time a count of a full
// meter takes is logged: it bounds how often the daemon counts.
func TestMeterFillCounted(t *testing.T) {
	l := newLab(t)
	enf := clientfw.New(clientfw.Options{Table: table, NetNS: l.fd})
	hour := time.Now().Add(time.Hour)
	limit := []intent.ClientAction{action(intent.ActionLimit, "10.0.2.0/24", 50, hour), action(intent.ActionBlock, c1Addr+"/32", 0, hour)}
	if _, err := enf.Apply(limit); err != nil {
		t.Fatal(err)
	}
	if got := fill(enf.Status().Fill); got != "block4 1, block6 0, limit4_50 1, meter4_50 0 of 65535" {
		t.Errorf("fill after the write %q", got)
	}
	var b strings.Builder
	b.WriteString("add element inet " + table + " meter4_50 { ")
	for i := range clientfw.MeterSize {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "10.%d.%d.%d", 100+i>>16, i>>8&0xff, i&0xff)
	}
	b.WriteString(" }\n")
	path := filepath.Join(t.TempDir(), "fill.nft")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := l.nft("-f", path); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	start := time.Now()
	if err := enf.Measure(); err != nil {
		t.Fatal(err)
	}
	t.Logf("counting a full meter of %d sources took %v", clientfw.MeterSize, time.Since(start).Round(time.Millisecond))
	if got := fill(enf.Status().Fill); got != "block4 1, block6 0, limit4_50 1, meter4_50 65535 of 65535" {
		t.Errorf("fill of the full meter %q", got)
	}
	// One more source is refused by the kernel: the meter is full.
	if out, err := l.nft("add", "element", "inet", table, "meter4_50", "{ 10.200.0.1 }"); err == nil {
		t.Errorf("a source beyond the meter's size was taken: %s", out)
	}
	// Blocks alone: counted from what was written, the kernel not asked.
	if _, err := enf.Apply(limit[1:]); err != nil {
		t.Fatal(err)
	}
	if err := enf.Measure(); err != nil {
		t.Fatal(err)
	}
	if got := fill(enf.Status().Fill); got != "block4 1, block6 0" {
		t.Errorf("fill with a block alone %q", got)
	}
	if _, err := enf.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if err := enf.Measure(); err != nil || len(enf.Status().Fill) != 0 {
		t.Errorf("fill with no table: %+v %v", enf.Status().Fill, err)
	}
}

// refusing is the namespace's kernel, whose calls fail with EPERM while
// refuse is set (lbdnsd without CAP_NET_ADMIN).
type refusing struct {
	clientfw.Netlink
	refuse bool
}

func (k *refusing) Read(name string) (clientfw.Actual, error) {
	if k.refuse {
		return clientfw.Actual{}, fmt.Errorf("netlink receive: %w", unix.EPERM)
	}
	return k.Netlink.Read(name)
}

func (k *refusing) Replace(name string, present bool, want clientfw.Ruleset, meterSize int) error {
	if k.refuse {
		return fmt.Errorf("netlink receive: %w", unix.EPERM)
	}
	return k.Netlink.Replace(name, present, want, meterSize)
}

// TestUnremovedStillDrops: a block whose removal the kernel refused
// still drops the client's packets, and the enforcer says so until the
// element's timeout; then the client is answered again and nothing is
// reported.
func TestUnremovedStillDrops(t *testing.T) {
	l := newLab(t)
	k := &refusing{Netlink: clientfw.Netlink{NetNS: l.fd}}
	enf := clientfw.New(clientfw.Options{Table: table, Kernel: k})
	if _, err := enf.Apply([]intent.ClientAction{action(intent.ActionBlock, c1Addr+"/32", 0, time.Now().Add(3*time.Second))}); err != nil {
		t.Fatal(err)
	}
	k.refuse = true
	if _, err := enf.Apply(nil); !errors.Is(err, clientfw.ErrPermission) {
		t.Fatalf("unblock with the kernel refusing: %v, want ErrPermission", err)
	}
	if got := l.answered(l.c1, 3, 300*time.Millisecond); got != 0 {
		t.Errorf("client 1, its unblock refused by the kernel, got %d of 3 answers", got)
	}
	if st := enf.Status(); len(st.Unremoved) != 1 || st.Enforced {
		t.Errorf("status while the element is still there: enforced %v, unremoved %+v", st.Enforced, st.Unremoved)
	}
	poll.Until(t, 8*time.Second, "the element to time out", func() (bool, string) {
		return l.answered(l.c1, 1, 200*time.Millisecond) == 1, ""
	})
	if st := enf.Status(); len(st.Unremoved) != 0 {
		t.Errorf("status once the element timed out: unremoved %+v", st.Unremoved)
	}
}
