package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/testkit/bird"
	"lbdns/testkit/ecmp"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
)

// The fault lab: the fleet as operators deploy it, under a seeded random
// sequence of faults, with a checker over the whole history.
//
// Three LB hosts (n1, n2, n3), each in its namespace, share one anycast
// GSLB listen address (faultAnycast), which each announces over BGP
// (lbdnsd's own [bgp]) to a BIRD 2 router in a namespace of its own; the
// router installs the three paths as one ECMP route, and clients in a
// namespace behind the router ask the anycast address, so that every
// query reaches whichever host the router's hash picks. The hosts share
// a three-member etcd cluster (TLS, client certificates) in its
// namespace, configure no [fleet] canaries (the canaries are what the
// hosts advertise), and monitor four GSLB members, each in its
// namespace. The hosts' links to the router carry only BGP and the
// clients' queries; etcd, the members and the other hosts are reached
// through the root namespace.
//
// While the faults run, clients ask api.g.test. A through the router
// (about 20 queries a second), and an operator raises the zone's TTL on
// a random host every 1.5 s (lbctl gslb ttl, each write a value of its
// own). The nemesis injects one fault at a time, each for a few seconds,
// then heals it: a host cut from the members (one host, or two), from
// etcd or from its peers (nftables in its namespace); kill -9 of a host
// (restarted after); SIGSTOP of a host; a host's descriptors exhausted
// through its status endpoint and its control socket (lbdnsd runs under
// prlimit --nofile); an etcd compaction; kill -9 of the etcd leader
// (restarted after); a member's death. (One etcd member cut off from its
// peers is fleet/etcdfleet's TestSavesWithOneMemberCutOff, against the
// cluster's peer proxies, which a cluster in a namespace has not.)
//
// The checker fails the test on: an answer with a dead member more than
// faultDeathBound after its death; an answer without a healthy member
// while a majority of the hosts could reach it (not killed, stopped or
// cut from the members, with faultSettle after any of that ended); an
// acknowledged write missing at the end, or a refused one applied; SOA
// serials or TTLs still different between the hosts once every fault is
// healed. It prints the seed, the schedule and every violation, so that
// a failure replays with LBDNS_FAULTLAB_SEEDS.
//
// The short form runs in the suite (one seed, 60 s of faults); the long
// form is
//
//	LBDNS_FAULTLAB_DURATION=10m LBDNS_FAULTLAB_SEEDS=1,2,3 go test -count=1 -timeout 60m -run TestFaultLab ./e2e
const (
	// faultAnycast is the hosts' shared GSLB listen address.
	faultAnycast = "192.0.2.53"
	// faultDeathBound is how long after a member's death an answer may
	// still hold it: its monitor's fall × interval + timeout (0.35 s),
	// the vote through etcd and the rebuild, with room for a busy
	// machine.
	faultDeathBound = 3 * time.Second
	// faultSettle is how long after a fault that took probers away
	// (kill, stop, cut) the fleet may take to judge again from every
	// host: a lease TTL for the dead host's votes to go, the warm-up of
	// a restarted one.
	faultSettle = 8 * time.Second
	// faultStatusPort is the hosts' status endpoint's port (on their
	// own unicast address).
	faultStatusPort = 8053
	// faultNofile is the hosts' descriptor limit.
	faultNofile = 1024
	// faultTTLBase is the first TTL the operator writes.
	faultTTLBase = 600
)

// faultLab is the fleet lab with the router, the clients and the
// history.
type faultLab struct {
	*fleetLab
	router, client *netns.Host
	birdSock       string
	hosts          []*fleetNode
	rng            *rand.Rand // the nemesis's (the schedule)
	opRng          *rand.Rand // the operator's (which host it writes on)
	start          time.Time

	mu       sync.Mutex
	windows  []faultWindow
	answers  []faultAnswer
	writes   []faultWrite
	schedule []string
}

// faultWindow is one fault, from its start to its heal.
type faultWindow struct {
	kind     string
	hosts    []string // the hosts it took away from the members
	member   string   // a member's death
	from, to time.Time
}

// faultAnswer is one client query.
type faultAnswer struct {
	sent, got time.Time
	addrs     []string // sorted; nil when lost
	rcode     int      // -1: lost
}

// faultWrite is one operator write.
type faultWrite struct {
	at    time.Time
	host  string
	value int
	code  int // lbctl's exit status
	out   string
}

// TestFaultLab runs the lab for each seed of LBDNS_FAULTLAB_SEEDS (1 by
// default) for LBDNS_FAULTLAB_DURATION of faults (60 s by default).
func TestFaultLab(t *testing.T) {
	bird.Require(t)
	seeds := []uint64{1}
	if s := os.Getenv("LBDNS_FAULTLAB_SEEDS"); s != "" {
		seeds = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("LBDNS_FAULTLAB_SEEDS=%q: %v", s, err)
			}
			seeds = append(seeds, n)
		}
	}
	dur := 60 * time.Second
	if s := os.Getenv("LBDNS_FAULTLAB_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("LBDNS_FAULTLAB_DURATION=%q: want a positive duration", s)
		}
		dur = d
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			l := newFaultLab(t, seed)
			l.run(dur)
			l.check()
		})
	}
}

// newFaultLab builds the lab and waits until every host is announced,
// answers every member and agrees on the serial.
func newFaultLab(t *testing.T, seed uint64) *faultLab {
	l := &faultLab{fleetLab: newFleetLab(t, "m1", "m2", "m3", "m4"), rng: rand.New(rand.NewPCG(seed, 0x1ab)), opRng: rand.New(rand.NewPCG(seed, 0x2cd))}
	t.Logf("fault lab: seed %d (LBDNS_FAULTLAB_SEEDS=%d replays it)", seed, seed)
	l.router, l.client = netns.New(t, "fault-router"), netns.New(t, "fault-client")
	netns.Link(t, l.router, "to-client", "10.0.250.1", l.client, "eth1", "10.0.250.2")
	netns.IP(t, "-n", l.client.Name(), "route", "replace", faultAnycast+"/32", "via", "10.0.250.1")
	l.router.Sysctl("net.ipv4.ip_forward=1")
	l.router.Sysctl("net.ipv4.fib_multipath_hash_policy=1") // spread the clients' flows by port too
	l.router.Sysctl("net.ipv4.conf.all.rp_filter=0")
	var protocols strings.Builder
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		n := l.newNode(name, fmt.Sprintf("dc%d", i))
		local, peer := fmt.Sprintf("10.0.%d.2", i), fmt.Sprintf("10.0.%d.1", i)
		netns.Link(t, l.router, "to-"+name, peer, n.host, "eth1", local)
		netns.IP(t, "-n", n.host.Name(), "addr", "add", faultAnycast+"/32", "dev", "lo")
		netns.IP(t, "-n", n.host.Name(), "route", "replace", "10.0.250.0/30", "via", peer)
		n.host.Sysctl("net.ipv4.conf.all.rp_filter=0")
		fmt.Fprintf(&protocols, "protocol bgp %s from lb { local %s as 65000; neighbor %s as 65001; }\n", name, peer, local)
		n.listen = faultAnycast + ":53"
		n.status = netip.AddrPortFrom(n.host.AddrV4(), faultStatusPort).String()
		n.noCanaries = true
		n.nofile = faultNofile
		n.extra = fmt.Sprintf("\n[bgp]\nrouter_id = %q\nlocal_as = 65001\nlisten_port = -1\n\n[[bgp.peer]]\naddress = %q\nas = 65000\nhold_time = \"3s\"\nkeepalive = \"1s\"\n", local, peer)
		n.write(l.creds)
		l.nodes[name] = n
		l.hosts = append(l.hosts, n)
	}
	l.birdSock = ecmp.StartRouter(t, l.router, "10.0.250.1", protocols.String())
	for _, n := range l.hosts {
		n.start()
	}
	for _, n := range l.hosts {
		n.d.waitReady()
	}
	poll.Until(t, 30*time.Second, "the router's ECMP route through every host", func() (bool, string) {
		out, _ := exec.Command("ip", "-n", l.router.Name(), "route", "show", faultAnycast+"/32").CombinedOutput()
		r := string(out)
		return strings.Contains(r, "10.0.1.2") && strings.Contains(r, "10.0.2.2") && strings.Contains(r, "10.0.3.2"), r
	})
	for _, n := range l.hosts {
		n.waitAnswerLocal("api.g.test", l.memberAddrs()...)
	}
	l.waitHealed("the lab's start", l.expectedTTL(0))
	return l
}

// since is the lab time of at, for the schedule.
func (l *faultLab) since(at time.Time) string {
	return fmt.Sprintf("t+%.1fs", at.Sub(l.start).Seconds())
}

// note adds a line to the schedule and the test log.
func (l *faultLab) note(format string, args ...any) {
	line := l.since(time.Now()) + " " + fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.schedule = append(l.schedule, line)
	l.mu.Unlock()
	l.t.Log("fault lab: " + line)
}

// run drives clients, the operator and the nemesis for dur, then heals.
func (l *faultLab) run(dur time.Duration) {
	l.start = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() { l.clients(ctx, g) })
	}
	wg.Go(func() { l.operator(ctx) })
	deadline := l.start.Add(dur)
	for time.Now().Before(deadline) {
		l.fault()
		time.Sleep(time.Duration(1500+l.rng.IntN(2000)) * time.Millisecond)
	}
	// Let the last heal settle with traffic on, then stop the load.
	time.Sleep(faultSettle)
	cancel()
	wg.Wait()
}

// fault injects one fault drawn from the lab's generator, holds it for
// a few seconds and heals it.
func (l *faultLab) fault() {
	hold := time.Duration(2000+l.rng.IntN(4000)) * time.Millisecond
	pick := l.rng.Perm(len(l.hosts))
	a, b := l.hosts[pick[0]], l.hosts[pick[1]]
	w := faultWindow{from: time.Now()}
	var heal func()
	switch kinds := []string{"cut-members", "cut-members-2", "cut-etcd", "cut-peers", "kill9", "sigstop", "exhaust-fds", "compact", "member-death", "kill-etcd-leader"}; kinds[l.rng.IntN(len(kinds))] {
	case "cut-members":
		w.kind, w.hosts = "cut-members", []string{a.name}
		l.note("cut %s from the members for %s", a.name, hold)
		heal = l.cutFromMembers(a)
	case "cut-members-2":
		w.kind, w.hosts = "cut-members", []string{a.name, b.name}
		l.note("cut %s and %s from the members for %s", a.name, b.name, hold)
		ha, hb := l.cutFromMembers(a), l.cutFromMembers(b)
		heal = func() { ha(); hb() }
	case "cut-etcd":
		w.kind = "cut-etcd"
		l.note("cut %s from etcd for %s", a.name, hold)
		a.host.DropFrom(l.etcdNS.AddrV4())
		heal = func() { a.host.UndropFrom(l.etcdNS.AddrV4()) }
	case "cut-peers":
		w.kind = "cut-peers"
		l.note("cut %s from its peers for %s", a.name, hold)
		var peers []netip.Addr
		for _, n := range l.hosts {
			if n != a {
				peers = append(peers, n.host.AddrV4())
				a.host.DropFrom(n.host.AddrV4())
			}
		}
		heal = func() {
			for _, p := range peers {
				a.host.UndropFrom(p)
			}
		}
	case "kill9":
		w.kind, w.hosts = "kill9", []string{a.name}
		l.note("kill -9 %s, restarted after %s", a.name, hold)
		a.d.kill9()
		heal = func() { a.start(); a.d.waitReady() }
	case "sigstop":
		w.kind, w.hosts = "sigstop", []string{a.name}
		l.note("SIGSTOP %s for %s", a.name, hold)
		a.d.signal(syscall.SIGSTOP)
		heal = func() { a.d.signal(syscall.SIGCONT) }
	case "exhaust-fds":
		w.kind = "exhaust-fds"
		l.note("exhaust %s's descriptors (%d idle connections to its status endpoint and control socket) for %s", a.name, faultNofile+100, hold)
		heal = l.exhaust(a, faultNofile+100)
	case "compact":
		w.kind = "compact"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rev, err := l.etcd.Compact(ctx)
		cancel()
		l.note("compact etcd at revision %d (err %v)", rev, err)
		heal = func() {}
	case "kill-etcd-leader":
		w.kind = "kill-etcd-leader"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		leader, err := l.etcd.MemberLeader(ctx, l.rng.IntN(len(l.etcd.Endpoints)))
		cancel()
		if err != nil || leader < 0 {
			l.note("no etcd leader to kill (%v): skipped", err)
			heal = func() {}
			break
		}
		l.note("kill -9 etcd member %d (the leader), restarted after %s", leader, hold)
		l.etcd.StopMember(leader)
		heal = func() {
			if err := l.etcd.StartMember(leader); err != nil {
				l.t.Fatalf("restart etcd member %d: %v", leader, err)
			}
		}
	case "member-death":
		m := l.memberNames[l.rng.IntN(len(l.memberNames))]
		w.kind, w.member = "member-death", m
		l.note("member %s dies for %s", m, hold)
		l.memberDown(m)
		heal = func() { l.memberUp(m) }
	}
	time.Sleep(hold)
	heal()
	w.to = time.Now() // after the heal: a restarted host is ready by then
	l.note("healed %s", w.kind)
	l.mu.Lock()
	l.windows = append(l.windows, w)
	l.mu.Unlock()
}

// exhaust opens up to count idle connections to n's status endpoint and
// control socket (half each) and returns what closes them.
func (l *faultLab) exhaust(n *fleetNode, count int) (heal func()) {
	var conns []net.Conn
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	for i := range count {
		network, addr := "tcp", n.status
		if i%2 == 1 {
			network, addr = "unix", n.socket
		}
		c, err := d.Dial(network, addr)
		if err != nil {
			continue // refused at its cap: what the listener should do
		}
		conns = append(conns, c)
	}
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// clients asks api.g.test. A through the router from four sockets of
// its own, one query at a time each, until ctx is done.
func (l *faultLab) clients(ctx context.Context, g int) {
	var conns []net.PacketConn
	for range 4 {
		c, err := l.client.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			l.t.Errorf("client socket: %v", err)
			return
		}
		defer c.Close()
		conns = append(conns, c)
	}
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(faultAnycast), 53))
	buf := make([]byte, 1500)
	for i := 0; ctx.Err() == nil; i++ {
		c := conns[i%len(conns)]
		q := new(dns.Msg)
		q.SetQuestion("api.g.test.", dns.TypeA)
		q.RecursionDesired = false
		q.Id = uint16(g<<12 | i&0xfff)
		wire, _ := q.Pack()
		a := faultAnswer{sent: time.Now(), rcode: -1}
		if _, err := c.WriteTo(wire, dst); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			for {
				n, _, err := c.ReadFrom(buf)
				if err != nil {
					break
				}
				r := new(dns.Msg)
				if r.Unpack(buf[:n]) != nil || r.Id != q.Id {
					continue // a late reply to an earlier query
				}
				a.got, a.rcode = time.Now(), r.Rcode
				a.addrs = []string{}
				for _, rr := range r.Answer {
					if x, ok := rr.(*dns.A); ok {
						a.addrs = append(a.addrs, x.A.String())
					}
				}
				slices.Sort(a.addrs)
				break
			}
		}
		l.mu.Lock()
		l.answers = append(l.answers, a)
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// operator raises the zone's TTL on a random host every 1.5 s, each
// write a value of its own, until ctx is done.
func (l *faultLab) operator(ctx context.Context) {
	for i := 1; ctx.Err() == nil; i++ {
		n := l.hosts[l.opRng.IntN(len(l.hosts))]
		w := faultWrite{at: time.Now(), host: n.name, value: faultTTLBase + i}
		cctx, cancel := context.WithTimeout(ctx, commandTimeout)
		cmd := command(cctx, binaries.lbctl, "-socket", n.socket, "-timeout", "3s", "gslb", "ttl", strconv.Itoa(w.value), "--zone", "g.test", "--reason", "fault lab")
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			w.code = ee.ExitCode()
		default:
			w.code = -1
		}
		w.out = strings.TrimSpace(string(out))
		if ctx.Err() != nil && w.code != 0 {
			// Cut short by the end of the run: the daemon may have
			// applied it before lbctl was killed, so its outcome is
			// unknown, as with exit 4.
			w.code, w.out = 4, "cut short by the end of the run: "+w.out
			l.mu.Lock()
			l.writes = append(l.writes, w)
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		l.writes = append(l.writes, w)
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(1500 * time.Millisecond):
		}
	}
}

// Outcomes of an operator write, by lbctl's exit status.
func writeAcked(code int) bool   { return code == 0 }
func writeUnknown(code int) bool { return code == 4 }

// expectedTTL is the TTLs the zone may have at the end: the last
// acknowledged write's and those of the writes after it whose outcome
// is unknown (before any write: the configured 0 means "none raised").
func (l *faultLab) expectedTTL(last int) []int {
	want := []int{last}
	acked := -1
	for i, w := range l.writes {
		if writeAcked(w.code) {
			acked, want = i, []int{w.value}
		}
	}
	for _, w := range l.writes[acked+1:] {
		if writeUnknown(w.code) {
			want = append(want, w.value)
		}
	}
	return want
}

// waitAnswerLocal waits until n, asked inside its namespace, answers
// qname with want.
func (n *fleetNode) waitAnswerLocal(qname string, want ...string) {
	n.lab.t.Helper()
	slices.Sort(want)
	poll.Until(n.lab.t, 20*time.Second, fmt.Sprintf("%s to answer %s %v", n.name, qname, want), func() (bool, string) {
		a, _, err := n.digLocal(qname, "A")
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(a.addrs, want), fmt.Sprint(a.addrs)
	})
}

// digLocal asks n's responder, on the anycast address inside n's
// namespace, for qname of type qtype; it returns the A answer and the
// SOA serial (0 without one).
func (n *fleetNode) digLocal(qname, qtype string) (digAnswer, uint32, error) {
	out, err := n.host.Command("dig", "@"+faultAnycast, qname, qtype, "+norecurse", "+tries=1", "+time=1").CombinedOutput()
	a := digAnswer{out: string(out), scope: -1}
	if err != nil || !strings.Contains(a.out, "status: NOERROR") {
		return a, 0, fmt.Errorf("dig %s %s in %s: %v: %s", qname, qtype, n.name, err, out)
	}
	for _, m := range digRR.FindAllStringSubmatch(a.out, -1) {
		a.ttl, _ = strconv.Atoi(m[1])
		a.addrs = append(a.addrs, m[2])
	}
	slices.Sort(a.addrs)
	var serial uint32
	for line := range strings.SplitSeq(a.out, "\n") {
		if f := strings.Fields(line); len(f) >= 7 && f[3] == "SOA" && !strings.HasPrefix(line, ";") {
			s, _ := strconv.ParseUint(f[6], 10, 32)
			serial = uint32(s)
		}
	}
	return a, serial, nil
}

// waitHealed waits until every host answers the same SOA serial and a
// TTL among ttls, and reports (as violations) what still differs after
// 30 s.
func (l *faultLab) waitHealed(what string, ttls []int) []string {
	var last []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		last = nil
		serials := map[uint32][]string{}
		for _, n := range l.hosts {
			_, serial, err := n.digLocal("g.test", "SOA")
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			serials[serial] = append(serials[serial], n.name)
			a, _, err := n.digLocal("api.g.test", "A")
			switch {
			case err != nil:
				last = append(last, err.Error())
			case ttls[0] != 0 && !slices.Contains(ttls, a.ttl):
				last = append(last, fmt.Sprintf("%s answers TTL %d; the writes allow %v", n.name, a.ttl, ttls))
			}
		}
		if len(serials) > 1 {
			last = append(last, fmt.Sprintf("SOA serials differ: %v", serials))
		}
		if len(last) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(last) > 0 && what == "the lab's start" {
		l.t.Fatalf("%s: %s", what, strings.Join(last, "; "))
	}
	return last
}

// check reads the whole history and fails the test on each violation,
// with the schedule.
func (l *faultLab) check() {
	t := l.t
	var v []string
	l.mu.Lock()
	answers, windows, writes := slices.Clone(l.answers), slices.Clone(l.windows), slices.Clone(l.writes)
	l.mu.Unlock()

	lost, answered, wrong := 0, 0, 0
	for _, a := range answers {
		if a.rcode == -1 {
			lost++
			continue
		}
		answered++
		bad := false
		for _, w := range windows {
			if w.kind != "member-death" {
				continue
			}
			addr := l.members[w.member].AddrV4().String()
			if a.got.After(w.from.Add(faultDeathBound)) && a.sent.Before(w.to) && slices.Contains(a.addrs, addr) {
				v = append(v, fmt.Sprintf("%s: answered dead member %s (%s), dead since %s", l.since(a.got), w.member, addr, l.since(w.from)))
				bad = true
			}
		}
		if l.anyCouldProbe(windows, a.sent) {
			for _, m := range l.memberNames {
				if l.memberHealthy(windows, m, a.sent) && !slices.Contains(a.addrs, l.members[m].AddrV4().String()) {
					v = append(v, fmt.Sprintf("%s: healthy member %s left out (rcode %d, answer %v) while a host could reach it", l.since(a.got), m, a.rcode, a.addrs))
					bad = true
				}
			}
		}
		if bad {
			wrong++
		}
	}

	acked, refused, unknown := 0, 0, 0
	for _, w := range writes {
		switch {
		case writeAcked(w.code):
			acked++
		case writeUnknown(w.code):
			unknown++
		default:
			refused++
		}
	}
	want := l.expectedTTL(0)
	if acked > 0 {
		v = append(v, l.waitHealed("the end", want)...)
	} else {
		v = append(v, l.waitHealed("the end", []int{0})...)
	}
	t.Logf("fault lab: %d queries, %d answered, %d lost (hosts killed or stopped, routes moving), %d wrong; %d writes: %d acknowledged, %d refused, %d unknown",
		len(answers), answered, lost, wrong, len(writes), acked, refused, unknown)
	for _, w := range writes {
		if !writeAcked(w.code) {
			t.Logf("fault lab: %s write %d on %s: exit %d: %s", l.since(w.at), w.value, w.host, w.code, w.out)
		}
	}
	if len(v) > 0 {
		t.Errorf("fault lab: %d violations; schedule:\n%s\nviolations:\n%s", len(v), strings.Join(l.schedule, "\n"), strings.Join(v[:min(len(v), 50)], "\n"))
	}
}

// anyCouldProbe reports whether, at at, a host could reach the members:
// not killed, stopped or cut from them then, nor within faultSettle
// after.
func (l *faultLab) anyCouldProbe(windows []faultWindow, at time.Time) bool {
	away := map[string]bool{}
	for _, w := range windows {
		if !at.Before(w.from) && at.Before(w.to.Add(faultSettle)) {
			for _, h := range w.hosts {
				away[h] = true
			}
		}
	}
	return len(away) < len(l.hosts)
}

// memberHealthy reports whether member m was alive at at, and had been
// for faultSettle.
func (l *faultLab) memberHealthy(windows []faultWindow, m string, at time.Time) bool {
	for _, w := range windows {
		if w.kind == "member-death" && w.member == m && !at.Before(w.from) && at.Before(w.to.Add(faultSettle)) {
			return false
		}
	}
	return true
}
