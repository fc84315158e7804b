package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"lbdns/internal/mmsg"
)

// udpLoad is a paced UDP load for the benchmarks, cheap enough per query
// that the responder, not the load, is what a 2-core host spends its CPU
// on: queries packed once, sent in batches by sendmmsg from one
// non-blocking socket per client (bound to its own loopback address,
// connected to the responder), the replies read in batches by recvmmsg
// and dropped, counted; one goroutine on its own thread for the whole
// load, waking on a ticker. (Per query, the net.UDPConn senders of the
// tests cost a write through the netpoller, and a read woken by it on
// a goroutine of their own per socket.)
type udpLoad struct {
	rate    atomic.Uint64 // asked, queries a second (math.Float64bits)
	clients []*loadClient

	sent, answered, refused atomic.Int64
	cpu                     atomic.Int64 // the load's thread, ns
	first, stopped          atomic.Int64 // the first send, the last tick: UnixNano
}

// loadClient is one socket of a udpLoad and its share of the rate.
type loadClient struct {
	fd     int
	share  float64
	credit float64 // queries owed, below one once sent
	wires  int
	next   int
	hdrs   []unix.Mmsghdr // hdrs[i] sends wire i%wires: any batch is contiguous
	recv   *mmsg.Recv
}

// loadClientSpec is a client of newUDPLoad: its address, its share of
// the load (summed to one by newUDPLoad) and the queries it sends, in
// turn.
type loadClientSpec struct {
	from  netip.Addr
	share float64
	wires [][]byte
}

// loadBatch is the most messages of one sendmmsg or recvmmsg.
const loadBatch = 64

// loadDrainEvery is how often a udpLoad reads its replies (their
// sockets' buffers hold that long's).
const loadDrainEvery = 10 * time.Millisecond

// newUDPLoad opens the clients' sockets towards to (IPv4), for rate
// queries a second in all; they close when run returns.
func newUDPLoad(tb testing.TB, to netip.AddrPort, rate float64, specs []loadClientSpec) *udpLoad {
	tb.Helper()
	l := &udpLoad{}
	l.setRate(rate)
	var sum float64
	for _, s := range specs {
		sum += s.share
	}
	dst := &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}
	for _, s := range specs {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			tb.Fatal(err)
		}
		c := &loadClient{fd: fd, share: s.share / sum, wires: len(s.wires)}
		l.clients = append(l.clients, c)
		// Room for the replies of a few ticks at the rates benchmarked
		// (SO_RCVBUFFORCE as root, past rmem_max).
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: s.from.As4()}); err != nil {
			l.close()
			tb.Fatalf("bind %s: %v", s.from, err)
		}
		if err := unix.Connect(fd, dst); err != nil {
			l.close()
			tb.Fatalf("connect %s: %v", to, err)
		}
		iovs := make([]unix.Iovec, len(s.wires)+loadBatch)
		c.hdrs = make([]unix.Mmsghdr, len(iovs))
		for i := range iovs {
			w := s.wires[i%len(s.wires)]
			iovs[i].Base = &w[0]
			iovs[i].SetLen(len(w))
			c.hdrs[i].Hdr.Iov = &iovs[i]
			c.hdrs[i].Hdr.SetIovlen(1)
		}
		bufs := make([][]byte, loadBatch)
		for i := range bufs {
			bufs[i] = make([]byte, 512)
		}
		c.recv = mmsg.NewRecv(bufs)
	}
	return l
}

// setRate changes the rate asked, from the next tick.
func (l *udpLoad) setRate(rate float64) { l.rate.Store(math.Float64bits(rate)) }

func (l *udpLoad) close() {
	for _, c := range l.clients {
		unix.Close(c.fd)
	}
}

// run sends the load every tick (the responder's socket buffer, 208 KiB
// by default, holds about 200 queries: a tick's must fit) and reads the
// replies every loadDrainEvery, until stop is closed or for at most
// limit, then reads the last replies and closes the sockets. A tick
// late by more than five ticks is owed five ticks' queries only (a
// burst is bounded); a refused send is not retried: both show as an
// offered rate below the one asked.
func (l *udpLoad) run(stop <-chan struct{}, tick, limit time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.close()
	base := threadCPU() // the thread's, before it took the load
	t := time.NewTicker(tick)
	defer t.Stop()
	end := time.Now().Add(limit)
	last := time.Now().Add(-tick)
	drainTicks := max(1, int(loadDrainEvery/tick))
	for ticks := 0; ; ticks++ {
		now := time.Now()
		dt := min(now.Sub(last), 5*tick).Seconds()
		last = now
		rate := math.Float64frombits(l.rate.Load())
		for _, c := range l.clients {
			c.credit += rate * c.share * dt
			if n := int(c.credit); n > 0 {
				c.credit -= float64(n)
				l.send(c, n)
			}
		}
		if ticks%drainTicks == 0 {
			for _, c := range l.clients {
				l.drain(c)
			}
			l.cpu.Store(threadCPU() - base)
		}
		if now.After(end) {
			break
		}
		select {
		case <-stop:
		case <-t.C:
			continue
		}
		break
	}
	l.stopped.Store(time.Now().UnixNano())
	time.Sleep(20 * time.Millisecond) // the replies under way
	for _, c := range l.clients {
		l.drain(c)
	}
	l.cpu.Store(threadCPU() - base)
}

// send sends n queries from c in batches, each followed by a drain of
// its replies.
func (l *udpLoad) send(c *loadClient, n int) {
	if l.first.Load() == 0 {
		l.first.Store(time.Now().UnixNano())
	}
	for n > 0 {
		k := min(n, loadBatch)
		sent, errno := mmsg.Send(uintptr(c.fd), c.hdrs[c.next:c.next+k], 0)
		if errno != 0 {
			sent = 0
		}
		l.sent.Add(int64(sent))
		l.refused.Add(int64(k - sent))
		c.next = (c.next + sent) % c.wires
		n -= k
		if k == loadBatch {
			l.drain(c)
		}
	}
}

// drain reads c's replies waiting, a bounded number of batches.
func (l *udpLoad) drain(c *loadClient) {
	for range 16 {
		n, errno := c.recv.Call(uintptr(c.fd), unix.MSG_DONTWAIT)
		if errno != 0 {
			return
		}
		l.answered.Add(int64(n))
		if n < loadBatch {
			return
		}
	}
}

// loadCounts is a snapshot of a load's counters.
type loadCounts struct {
	at             time.Time
	sent, answered int64
	cpu            time.Duration
}

func (l *udpLoad) counts() loadCounts {
	return loadCounts{time.Now(), l.sent.Load(), l.answered.Load(), time.Duration(l.cpu.Load())}
}

// rates are l's offered and answered rates between two snapshots, over
// the part of that time it sent in (from its first send to its last
// tick).
func (l *udpLoad) rates(a, b loadCounts) (offered, answered float64) {
	from, to := a.at, b.at
	if f := l.first.Load(); f != 0 && time.Unix(0, f).After(from) {
		from = time.Unix(0, f)
	}
	if s := l.stopped.Load(); s != 0 && time.Unix(0, s).Before(to) {
		to = time.Unix(0, s)
	}
	secs := to.Sub(from).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	return float64(b.sent-a.sent) / secs, float64(b.answered-a.answered) / secs
}

// zipfShares are the shares of n ranks under a Zipf law of exponent s.
func zipfShares(n int, s float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1 / math.Pow(float64(i+1), s)
	}
	return out
}

// packQueries packs n A queries of names drawn by pick (an index into
// names), each with its own ID from r.
func packQueries(tb testing.TB, r *rand.Rand, names []string, n int, pick func() int) [][]byte {
	tb.Helper()
	out := make([][]byte, n)
	for i := range out {
		m := new(dns.Msg).SetQuestion(names[pick()], dns.TypeA)
		m.Id = uint16(r.Uint32())
		w, err := m.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = w
	}
	return out
}

// threadCPU is the calling thread's CPU time, ns.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// processCPU is the process's CPU time, every thread's, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostCPU is the host's CPU time from /proc/stat's first line, in clock
// ticks: idle (idle and iowait) and in all.
type hostCPU struct{ idle, total int64 }

func readHostCPU() (hostCPU, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return hostCPU{}, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return hostCPU{}, errors.New("/proc/stat: empty")
	}
	fields := strings.Fields(s.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return hostCPU{}, fmt.Errorf("/proc/stat: first line %q", s.Text())
	}
	var h hostCPU
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return hostCPU{}, fmt.Errorf("/proc/stat: %q: %w", f, err)
		}
		if i >= 8 { // guest times are counted in user and nice already
			break
		}
		h.total += v
		if i == 3 || i == 4 {
			h.idle += v
		}
	}
	return h, nil
}

// idleShare is the host's idle share between a and b, in percent.
func (a hostCPU) idleShare(b hostCPU) float64 {
	if b.total == a.total {
		return 0
	}
	return 100 * float64(b.idle-a.idle) / float64(b.total-a.total)
}

// udpDrops is the datagrams the kernel dropped at the IPv4 UDP sockets
// bound to port (/proc/net/udp: their receive buffers were full).
func udpDrops(port uint16) int64 {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0
	}
	suffix := fmt.Sprintf(":%04X", port)
	var n int64
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !strings.HasSuffix(f[1], suffix) {
			continue
		}
		if v, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil {
			n += v
		}
	}
	return n
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// window measures loads over a span of time: their rates, the host's
// idle share and the CPU of the rest of the process (the daemon) per
// query answered.
type window struct {
	at    time.Time
	port  uint16 // the responder's
	drops int64
	loads []*udpLoad
	from  []loadCounts
	host  hostCPU
	proc  time.Duration
}

// windowRates is what a window measured.
type windowRates struct {
	secs     float64
	parts    []partRates // one per load, in order
	idle     float64     // the host's idle share, %
	drops    float64     // queries a second dropped at the responder's socket
	daemonNs float64     // the process's CPU less the loads', per query answered
}

type partRates struct {
	offered, answered float64 // queries a second
	loadNs            float64 // the load's thread CPU per query offered
}

func startWindow(port uint16, loads ...*udpLoad) window {
	w := window{at: time.Now(), port: port, drops: udpDrops(port), loads: loads, proc: processCPU()}
	w.host, _ = readHostCPU()
	for _, l := range loads {
		w.from = append(w.from, l.counts())
	}
	return w
}

func (w window) end() windowRates {
	var out windowRates
	var loadCPU time.Duration
	var answered float64
	for i, l := range w.loads {
		c := l.counts()
		offered, ans := l.rates(w.from[i], c)
		cpu := c.cpu - w.from[i].cpu
		loadCPU += cpu
		answered += float64(c.answered - w.from[i].answered)
		p := partRates{offered: offered, answered: ans}
		if n := c.sent - w.from[i].sent; n > 0 {
			p.loadNs = float64(cpu.Nanoseconds()) / float64(n)
		}
		out.parts = append(out.parts, p)
	}
	out.secs = time.Since(w.at).Seconds()
	out.drops = float64(udpDrops(w.port)-w.drops) / out.secs
	if h, err := readHostCPU(); err == nil {
		out.idle = w.host.idleShare(h)
	}
	if answered > 0 {
		out.daemonNs = float64((processCPU() - w.proc - loadCPU).Nanoseconds()) / answered
	}
	return out
}

// sumWindows weighs windows by their length.
func sumWindows(ws []windowRates) windowRates {
	var out windowRates
	for _, w := range ws {
		out.secs += w.secs
	}
	for _, w := range ws {
		f := w.secs / out.secs
		for i, p := range w.parts {
			if i == len(out.parts) {
				out.parts = append(out.parts, partRates{})
			}
			out.parts[i].offered += f * p.offered
			out.parts[i].answered += f * p.answered
			out.parts[i].loadNs += f * p.loadNs
		}
		out.idle += f * w.idle
		out.drops += f * w.drops
		out.daemonNs += f * w.daemonNs
	}
	return out
}

func (w windowRates) String() string {
	var b strings.Builder
	for i, p := range w.parts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "load %d offered %.0f/s answered %.0f/s (its thread %.0f ns/q)", i+1, p.offered, p.answered, p.loadNs)
	}
	fmt.Fprintf(&b, " over %.1f s; dropped at the responder's socket %.0f/s; host idle %.0f %%; daemon %.0f ns of CPU per query answered", w.secs, w.drops, w.idle, w.daemonNs)
	return b.String()
}
