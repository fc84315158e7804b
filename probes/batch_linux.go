package probes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"lbdns/check"
	"lbdns/internal/mmsg"
)

// Batch sizes of the engine: datagrams per sendmmsg and per recvmmsg.
const (
	sendBatch = 64
	recvBatch = 16
	// sweepEvery is the granularity of the engine's timeouts: the sweeper
	// wakes at the earliest deadline of the probes in flight, but at most
	// once per sweepEvery, and at least once per sweepIdle.
	sweepEvery = 5 * time.Millisecond
	sweepIdle  = 100 * time.Millisecond
	// engineRcvBuf is the receive buffer asked for each engine socket, so
	// that a burst of replies waits in the kernel while a reader judges.
	engineRcvBuf = 4 << 20
)

// StartCheck starts one UDP probe through the prober's batch engine and
// returns at once (monitor.AsyncChecker): the query goes out with others
// in one sendmmsg on a shared socket, the reply is read with others in one
// recvmmsg and matched to this probe by its source address and ID, and
// done gets the result, judged as Check judges it, by deadline (then
// "timeout after ..."). An ICMP error for the target (IP_RECVERR) fails
// the probe at once ("connection refused"). A reply from the target with
// another ID fails it ("id mismatch"), except a late duplicate of the
// previous answer, which is skipped. A TCP check, or one without a
// DNSProber, runs Check in a goroutine instead.
func (c *dnsChecker) StartCheck(deadline time.Time, done func(check.Result)) {
	c.startCheck(deadline, done, false)
}

// StartHeld starts a check as StartCheck does, but leaves its query queued
// until the returned engine's Flush (monitor.BatchChecker, whose Flusher is
// this unnamed interface: probes does not import monitor), so that the
// checks the scheduler starts together go out in one sendmmsg from its
// goroutine; nil when nothing waits for a Flush.
func (c *dnsChecker) StartHeld(deadline time.Time, done func(check.Result)) interface{ Flush() } {
	if e := c.startCheck(deadline, done, true); e != nil {
		return e
	}
	return nil
}

// startCheck is StartCheck; with held, the query waits for the returned
// engine's Flush (nil when none is needed).
func (c *dnsChecker) startCheck(deadline time.Time, done func(check.Result), held bool) *engine {
	if c.p == nil || c.network != "udp" {
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			done(c.Check(ctx))
		}()
		return nil
	}
	start := time.Now()
	e, err := c.p.batchEngine(c.target.Addr())
	if err != nil {
		done(failure(start, err.Error(), err, c.target))
		return nil
	}
	t := c.template()
	if t.err != nil {
		done(Result{RTT: time.Since(start), Detail: "bad check: pack query: " + t.err.Error()})
		return nil
	}
	if !e.start(c, t, start, deadline, done, held) {
		return nil
	}
	return e
}

// DroppedReplies is the number of datagrams the batch engine read and
// dropped: from an address with no probe in flight, or with an ID that no
// probe in flight from that address carries while several are.
func (p *DNSProber) DroppedReplies() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, e := range p.engines {
		if e != nil {
			n += e.dropped.Load()
		}
	}
	return n
}

// batchEngine returns the engine of a's family, starting it on first use.
func (p *DNSProber) batchEngine(a netip.Addr) (*engine, error) {
	fam := 0
	if a.Is6() && !a.Is4In6() {
		fam = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("prober closed")
	}
	if e := p.engines[fam]; e != nil {
		return e, nil
	}
	e, err := newEngine(fam == 1)
	if err != nil {
		return nil, fmt.Errorf("batch engine: %w", err)
	}
	p.engines[fam] = e
	return e, nil
}

// probe is one UDP query in flight through an engine.
type probe struct {
	c *dnsChecker
	t *queryTemplate
	// id and rnd are the query's ID and random label value; wire is the
	// packed query, in buf when it fits.
	id       uint16
	rnd      uint64
	wire     []byte
	buf      [probeBufSize]byte
	start    time.Time
	deadline time.Time
	done     func(check.Result)
	// s is the target's slot; next is the next probe in flight to the
	// same address (s.head's chain).
	s    *slot
	next *probe
	// prevFlight and nextFlight link the probes in flight (e.flight),
	// for the sweeper and close; inflight is set while pr is linked.
	prevFlight, nextFlight *probe
	inflight               bool
	// queued is set while the sender holds the probe, finished once its
	// done returned: a probe is reused when both are over (e.free).
	queued, finished bool
}

// slot is an engine's state of one target address, made by its first
// probe and kept by its checker (dnsChecker.slot), so that starting a
// probe looks nothing up; a reply finds it by its source address
// (engine.slots), the one map lookup of a probe.
type slot struct {
	e    *engine        // the engine it belongs to
	k    netip.AddrPort // unmapped, as replies come
	addr *net.UDPAddr   // for sendmmsg, made once
	// head is the first probe in flight to k (nil when none is).
	head *probe
	// lastID is the ID of the last query to k that got its answer (when
	// hasLast): a late duplicate of that answer is skipped, not judged.
	lastID  uint16
	hasLast bool
}

// probeBufSize is the room for the packed query within a probe: the
// header, a name of up to 255 bytes and the type and class.
const probeBufSize = 12 + 255 + 4

// query is pr's query as a message, for the judgement of a reply that
// judgeWire leaves undecided.
func (pr *probe) query() *dns.Msg {
	return pr.c.queryOf(pr.id, pr.rnd)
}

// engine sends queries and reads replies on one unconnected UDP socket of
// one address family, with three goroutines: a sender (sendmmsg, for the
// queries not held for a Flush), a reader (recvmmsg, and the error queue
// for ICMP errors) and a sweeper (timeouts).
type engine struct {
	conn  *net.UDPConn
	write func([]ipv4.Message, int) (int, error)
	rc    syscall.RawConn
	is6   bool

	dropped atomic.Int64

	kick      chan struct{}
	sweepKick chan struct{}
	quit      chan struct{}
	wg        sync.WaitGroup

	// sendMu serializes the sending of queued queries (the sender's and
	// Flush's); msgs and spare are theirs.
	sendMu sync.Mutex
	msgs   []ipv4.Message
	spare  []*probe // the send queue's slice handed back last time

	mu     sync.Mutex
	sendq  []*probe
	closed bool
	// slots holds each target address's slot, by its unmapped address.
	slots map[netip.AddrPort]*slot
	// flight is the first of the probes in flight (linked through
	// probe.nextFlight), pending their count.
	flight  *probe
	pending int
	// free holds the probes done with, for reuse: in the steady state a
	// probe allocates nothing.
	free []*probe
	// nextSweep is when the sweeper wakes next; a probe with an earlier
	// deadline wakes it.
	nextSweep time.Time
}

// newEngine opens the socket of one family and starts the goroutines.
func newEngine(is6 bool) (*engine, error) {
	network, laddr := "udp4", &net.UDPAddr{IP: net.IPv4zero}
	if is6 {
		network, laddr = "udp6", &net.UDPAddr{IP: net.IPv6unspecified}
	}
	conn, err := net.ListenUDP(network, laddr)
	if err != nil {
		return nil, err
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if is6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVERR, 1)
		}
		// A larger buffer than rmem_max needs CAP_NET_ADMIN; else the
		// capped one below.
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, engineRcvBuf) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, engineRcvBuf)
		}
	}); err != nil || serr != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("set recverr: %w", errors.Join(err, serr))
	}
	e := &engine{
		conn:      conn,
		rc:        rc,
		is6:       is6,
		kick:      make(chan struct{}, 1),
		sweepKick: make(chan struct{}, 1),
		quit:      make(chan struct{}),
		msgs:      make([]ipv4.Message, sendBatch),
		slots:     make(map[netip.AddrPort]*slot),
	}
	for i := range e.msgs {
		e.msgs[i].Buffers = make([][]byte, 1)
	}
	if is6 {
		pc := ipv6.NewPacketConn(conn)
		e.write = pc.WriteBatch
	} else {
		pc := ipv4.NewPacketConn(conn)
		e.write = pc.WriteBatch
	}
	e.wg.Add(3)
	go e.sendLoop()
	go e.readLoop()
	go e.sweepLoop()
	return e, nil
}

// key is the map key of a target address: unmapped, as replies come.
func key(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// start puts a probe of c in flight, its query packed from t with a random
// ID and label, and queues the query: for the sender, or with held for the
// next Flush. It reports whether the query was queued (false when the
// engine is closed: done got the result).
func (e *engine) start(c *dnsChecker, t *queryTemplate, start, deadline time.Time, done func(check.Result), held bool) bool {
	id, rnd := uint16(rand.Uint32()), rand.Uint64()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		done(Result{RTT: time.Since(start), Detail: "prober closed"})
		return false
	}
	s := c.slot
	if s == nil || s.e != e {
		s = e.slotLocked(key(c.target))
		c.slot = s
	}
	if s.hasLast && s.lastID == id {
		id++
	}
	var pr *probe
	if n := len(e.free); n > 0 {
		pr, e.free = e.free[n-1], e.free[:n-1]
	} else {
		pr = new(probe)
	}
	pr.c, pr.t, pr.id, pr.rnd = c, t, id, rnd
	pr.start, pr.deadline, pr.done = start, deadline, done
	pr.wire = c.packQuery(t, pr.buf[:0], id, rnd)
	pr.queued, pr.finished = true, false
	pr.s = s
	pr.next = s.head
	s.head = pr
	e.linkLocked(pr)
	e.sendq = append(e.sendq, pr)
	sweep := e.nextSweep.IsZero() || deadline.Before(e.nextSweep)
	if sweep {
		e.nextSweep = deadline
	}
	e.mu.Unlock()
	if sweep {
		select {
		case e.sweepKick <- struct{}{}:
		default:
		}
	}
	if !held {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// Flush sends the queued queries now, from the caller's goroutine
// (monitor.Flusher).
func (e *engine) Flush() {
	e.sendQueued()
}

// slotLocked returns the slot of k, making it on first use. e.mu must be
// held.
func (e *engine) slotLocked(k netip.AddrPort) *slot {
	s := e.slots[k]
	if s == nil {
		s = &slot{e: e, k: k, addr: net.UDPAddrFromAddrPort(k)}
		e.slots[k] = s
	}
	return s
}

// linkLocked adds pr to the probes in flight. e.mu must be held.
func (e *engine) linkLocked(pr *probe) {
	pr.prevFlight, pr.nextFlight = nil, e.flight
	if e.flight != nil {
		e.flight.prevFlight = pr
	}
	e.flight = pr
	pr.inflight = true
	e.pending++
}

// takeLocked removes pr from the probes in flight; it reports false when
// pr was no longer there (already ended). e.mu must be held.
func (e *engine) takeLocked(pr *probe) bool {
	if !pr.inflight {
		return false
	}
	s := pr.s
	var prev *probe
	for cur := s.head; cur != nil; prev, cur = cur, cur.next {
		if cur != pr {
			continue
		}
		if prev != nil {
			prev.next = cur.next
		} else {
			s.head = cur.next
		}
		cur.next = nil
		break
	}
	if pr.prevFlight != nil {
		pr.prevFlight.nextFlight = pr.nextFlight
	} else {
		e.flight = pr.nextFlight
	}
	if pr.nextFlight != nil {
		pr.nextFlight.prevFlight = pr.prevFlight
	}
	pr.prevFlight, pr.nextFlight, pr.inflight = nil, nil, false
	e.pending--
	return true
}

// end ends pr with r unless it already ended.
func (e *engine) end(pr *probe, r Result) {
	e.mu.Lock()
	ok := e.takeLocked(pr)
	e.mu.Unlock()
	if ok {
		e.finish(pr, r)
	}
}

// finish gives r to pr's done and then frees pr, once no longer in
// flight (taken from e.pending by the caller).
func (e *engine) finish(pr *probe, r Result) {
	pr.done(r)
	e.mu.Lock()
	pr.finished = true
	e.releaseLocked(pr)
	e.mu.Unlock()
}

// releaseLocked puts pr on the free list when both its sending and its
// judging are over. e.mu must be held.
func (e *engine) releaseLocked(pr *probe) {
	if pr.queued || !pr.finished || e.closed {
		return
	}
	pr.c, pr.t, pr.done, pr.s, pr.wire = nil, nil, nil, nil, nil
	e.free = append(e.free, pr)
}

// sendLoop sends the queued queries in batches until the engine closes.
func (e *engine) sendLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.quit:
			return
		case <-e.kick:
		}
		e.sendQueued()
	}
}

// sendQueued sends the queries queued so far in batches of sendBatch.
func (e *engine) sendQueued() {
	e.sendMu.Lock()
	defer e.sendMu.Unlock()
	msgs := e.msgs
	e.mu.Lock()
	batch := e.sendq
	e.sendq, e.spare = e.spare[:0], batch
	e.mu.Unlock()
	retried := false
	for len(batch) > 0 {
		n := min(len(batch), sendBatch)
		for i, pr := range batch[:n] {
			msgs[i].Buffers[0] = pr.wire
			msgs[i].Addr = pr.s.addr
		}
		sent, err := e.write(msgs[:n], 0)
		if sent < n {
			// An ICMP error raised while this batch was being sent
			// (on loopback, within the same sendmmsg) sets the
			// socket's pending error, which the next datagram's send
			// takes: sendmmsg then stops and drops it, or returns it
			// for the first datagram. The reader never sees it, so
			// the error queue, which names the refusing target, is
			// read here.
			e.readErrQueue()
		}
		if sent <= 0 && !retried {
			// The error may be another target's (above): send
			// the first datagram once more before blaming it.
			retried = true
			continue
		}
		retried = false
		if sent <= 0 {
			// The first datagram failed twice: end its probe, go
			// on.
			sent = 1
			if err == nil {
				err = errors.New("sendmmsg sent nothing")
			}
			pr := batch[0]
			e.end(pr, failure(pr.start, describeErr(context.Background(), err, pr.deadline.Sub(pr.start)), err, pr.c.target))
		}
		for i := range msgs[:n] {
			msgs[i].Buffers[0], msgs[i].Addr = nil, nil
		}
		e.mu.Lock()
		for _, pr := range batch[:sent] {
			pr.queued = false
			e.releaseLocked(pr)
		}
		e.mu.Unlock()
		clear(batch[:sent])
		batch = batch[sent:]
	}
}

// readLoop reads replies in batches and judges them until the engine
// closes.
func (e *engine) readLoop() {
	defer e.wg.Done()
	r := newBatchReader(e.rc)
	for {
		n, err := r.read()
		for i := range n {
			from, raw, ok := r.datagram(i)
			if !ok {
				e.dropped.Add(1)
				continue
			}
			e.reply(from, raw)
		}
		if err == nil {
			continue
		}
		select {
		case <-e.quit:
			return
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		e.readErrQueue()
	}
}

// batchReader reads datagrams with recvmmsg(2) (package mmsg) into
// buffers of its own, and their sources into raw socket addresses: no
// allocation per call (golang.org/x/net's ReadBatch makes a
// *net.UDPAddr per datagram).
type batchReader struct {
	rc syscall.RawConn
	mm *mmsg.Recv
	// n and errno are the result of the last recvmmsg; fn makes that
	// call, made once.
	n     int
	errno error
	fn    func(fd uintptr) bool
}

// newBatchReader returns a reader of the socket rc.
func newBatchReader(rc syscall.RawConn) *batchReader {
	bufs := make([][]byte, recvBatch)
	for i := range bufs {
		bufs[i] = make([]byte, udpBufSize)
	}
	r := &batchReader{rc: rc, mm: mmsg.NewRecv(bufs)}
	r.fn = func(fd uintptr) bool {
		n, errno := r.mm.Call(fd, unix.MSG_DONTWAIT)
		switch errno {
		case 0:
			r.n, r.errno = n, nil
		case unix.EAGAIN, unix.EINTR:
			return false // wait until readable
		default:
			r.n, r.errno = 0, errno
		}
		return true
	}
	return r
}

// read waits for datagrams and reads up to recvBatch of them. An ICMP
// error pending on the socket (IP_RECVERR) comes back as err.
func (r *batchReader) read() (n int, err error) {
	if err := r.rc.Read(r.fn); err != nil {
		return 0, err
	}
	return r.n, r.errno
}

// datagram returns the i-th datagram of the last read and its source,
// unmapped; ok is false for a source of another family.
func (r *batchReader) datagram(i int) (from netip.AddrPort, raw []byte, ok bool) {
	from, ok = r.mm.Source(i)
	return from, r.mm.Data(i), ok
}

// reply matches one datagram from k to a probe in flight and ends it.
func (e *engine) reply(k netip.AddrPort, raw []byte) {
	var id uint16
	if len(raw) >= 2 {
		id = binary.BigEndian.Uint16(raw)
	}
	e.mu.Lock()
	var head *probe
	s := e.slots[k]
	if s != nil {
		head = s.head
	}
	var pr *probe
	for cur := head; cur != nil; cur = cur.next {
		if cur.id == id {
			pr = cur
			break
		}
	}
	switch {
	case pr != nil:
	case head == nil:
		// Nothing in flight to k: a late or stray datagram.
		e.mu.Unlock()
		e.dropped.Add(1)
		return
	case len(raw) >= 2 && s.hasLast && s.lastID == id:
		e.mu.Unlock() // a late duplicate of the previous answer
		return
	case head.next != nil:
		// Several probes to k, none with this ID: it cannot be
		// credited to any of them.
		e.mu.Unlock()
		e.dropped.Add(1)
		return
	default:
		pr = head // the one probe to k: a wrong ID fails it
	}
	e.takeLocked(pr)
	clean := len(raw) >= 12 && binary.BigEndian.Uint16(raw) == pr.id
	if clean {
		s.lastID, s.hasLast = pr.id, true
	}
	e.mu.Unlock()
	e.judge(pr, raw)
}

// judge judges pr's reply raw, as Check does, and ends pr; a truncated
// reply is retried over TCP in a goroutine, within pr's deadline. raw is
// the reader's buffer: everything kept from it is copied.
func (e *engine) judge(pr *probe, raw []byte) {
	if v, detail, ok := pr.c.judge.judgeWire(pr.t, pr.wire, raw); ok {
		e.finish(pr, Result{OK: v == verdictOK, RTT: time.Since(pr.start), Detail: detail})
		return
	}
	q := pr.query()
	r, v, detail := validate(q, raw)
	switch v {
	case verdictFail:
		e.finish(pr, Result{RTT: time.Since(pr.start), Detail: detail})
		return
	case verdictTruncated:
		go e.tcpRetry(pr)
		return
	}
	ok, detail := pr.c.judge.judge(r)
	e.finish(pr, Result{OK: ok, RTT: time.Since(pr.start), Detail: detail})
}

// tcpRetry asks pr's question again over TCP after a truncated UDP reply,
// like roundTrip, and ends pr.
func (e *engine) tcpRetry(pr *probe) {
	ctx, cancel := context.WithDeadline(context.Background(), pr.deadline)
	defer cancel()
	budget := pr.deadline.Sub(pr.start)
	res := func(ok bool, detail string) {
		e.finish(pr, Result{OK: ok, RTT: time.Since(pr.start), Detail: detail})
	}
	raw, err := exchange(ctx, "tcp", pr.c.target, pr.wire)
	if err != nil {
		res(false, "truncated over udp; tcp: "+describeErr(ctx, err, budget))
		return
	}
	r, v, detail := validate(pr.query(), raw)
	switch v {
	case verdictTruncated:
		res(false, "truncated over udp; truncated over tcp too")
		return
	case verdictFail:
		res(false, "truncated over udp; tcp: "+detail)
		return
	}
	ok, detail := pr.c.judge.judge(r)
	if ok {
		detail += ", via tcp after truncation"
	} else {
		detail = "truncated over udp; tcp: " + detail
	}
	res(ok, detail)
}

// readErrQueue reads the socket's error queue (IP_RECVERR) and fails the
// probes in flight to each address an ICMP error names. It never waits,
// and takes no lock of the socket's reader (rc.Control, not rc.Read): the
// sender calls it while the reader waits in recvmmsg.
func (e *engine) readErrQueue() {
	rc, err := e.conn.SyscallConn()
	if err != nil {
		return
	}
	type failure struct {
		k     netip.AddrPort
		errno unix.Errno
	}
	var fails []failure
	_ = rc.Control(func(fd uintptr) {
		var buf [512]byte
		var oob [512]byte
		for {
			_, oobn, _, from, err := unix.Recvmsg(int(fd), buf[:], oob[:], unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			if err != nil {
				return // EAGAIN: the queue is empty
			}
			k, ok := mmsg.FromSockaddr(from)
			if !ok {
				continue
			}
			errno := unix.ECONNREFUSED
			if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, cm := range cms {
					if len(cm.Data) >= 4 {
						errno = unix.Errno(binary.NativeEndian.Uint32(cm.Data))
						break
					}
				}
			}
			fails = append(fails, failure{k, errno})
		}
	})
	for _, f := range fails {
		e.mu.Lock()
		var ended []*probe
		if s := e.slots[f.k]; s != nil {
			for s.head != nil {
				pr := s.head
				e.takeLocked(pr)
				ended = append(ended, pr)
			}
		}
		e.mu.Unlock()
		for _, pr := range ended {
			detail := describeErr(context.Background(), f.errno, pr.deadline.Sub(pr.start))
			e.finish(pr, Result{RTT: time.Since(pr.start), Detail: detail})
		}
	}
}

// sweepLoop ends the probes past their deadline until the engine closes.
// It sleeps until the earliest deadline in flight (at least sweepEvery, at
// most sweepIdle), woken earlier by a probe that ends sooner: in the steady
// state a few wake-ups a second, not one per sweepEvery.
func (e *engine) sweepLoop() {
	defer e.wg.Done()
	timer := time.NewTimer(sweepIdle)
	defer timer.Stop()
	var expired []*probe
	for {
		select {
		case <-e.quit:
			return
		case <-timer.C:
		case <-e.sweepKick:
		}
		now := time.Now()
		next := now.Add(sweepIdle)
		e.mu.Lock()
		for cur := e.flight; cur != nil; cur = cur.nextFlight {
			if !now.Before(cur.deadline) {
				expired = append(expired, cur)
			} else if cur.deadline.Before(next) {
				next = cur.deadline
			}
		}
		for _, pr := range expired {
			e.takeLocked(pr)
		}
		if soon := now.Add(sweepEvery); next.Before(soon) {
			next = soon
		}
		e.nextSweep = next
		e.mu.Unlock()
		timer.Reset(next.Sub(now))
		for _, pr := range expired {
			e.finish(pr, Result{RTT: time.Since(pr.start), Detail: "timeout after " + roundBudget(pr.deadline.Sub(pr.start)).String()})
		}
		clear(expired)
		expired = expired[:0]
	}
}

// close stops the engine and ends every probe in flight.
func (e *engine) close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	close(e.quit)
	err := e.conn.Close()
	e.wg.Wait()
	e.mu.Lock()
	var ended []*probe
	for e.flight != nil {
		pr := e.flight
		e.takeLocked(pr)
		ended = append(ended, pr)
	}
	e.mu.Unlock()
	for _, pr := range ended {
		pr.done(Result{RTT: time.Since(pr.start), Detail: "canceled"})
	}
	return err
}
