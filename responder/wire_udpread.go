package responder

import (
	"net/netip"
	"runtime"
	"sync"
	"time"

	"lbdns/internal/mmsg"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"lbdns/flood"
)

// udpBatch is how many queries a reader takes in one recvmmsg, and
// replies sends in one sendmmsg (at most: recvmmsg returns what is
// queued once one has come). 64 rather than 16: on the 2-CPU benchmark
// host lbdnsd's CPU per query against gdnsd's went from 0.95-1.10 to
// 0.82-0.93 (bench/README.md, "2026-11-30 (session 16): the reply
// cache, one reader with a P to spare").
const udpBatch = 64

// batch is a reader's reused storage: the headers of the queries read
// (mmsg.Recv) and of the replies sent, and the buffers they point at. It
// lives on the heap for the reader's life: the kernel reads and writes
// it.
type batch struct {
	r    *mmsg.Recv
	wh   [udpBatch]unix.Mmsghdr
	wiov [udpBatch]unix.Iovec
	in   [udpBatch][]byte
	out  [udpBatch][]byte
	oob  [udpBatch][]byte
	woob [udpBatch][]byte
}

// bufStride is the distance between the starts of a reader's buffers:
// room for the largest message, and 3 cache lines more, so that the 2 *
// udpBatch starts spread evenly over the cache's sets.
const bufStride = 1<<16 + 3*64

// newBatch returns a reader's storage, with control message buffers when
// pktinfo is set.
func newBatch(pktinfo bool) *batch {
	b := new(batch)
	// The buffers are cut from one slab, each start a few cache lines
	// on from the last's in the cache's sets: buffers allocated apart
	// start page-aligned, so the first lines of all of them, the only
	// ones most queries and replies touch, would compete for one set
	// of the CPU's caches.
	slab := make([]byte, 2*udpBatch*bufStride)
	for i := range udpBatch {
		in, out := 2*i*bufStride, (2*i+1)*bufStride
		b.in[i] = slab[in : in+dns.MaxMsgSize : in+dns.MaxMsgSize]
		b.out[i] = slab[out : out+dns.MaxMsgSize : out+dns.MaxMsgSize]
		b.wh[i].Hdr.Iov = &b.wiov[i]
		b.wh[i].Hdr.SetIovlen(1)
	}
	b.r = mmsg.NewRecv(b.in[:])
	if pktinfo {
		for i := range udpBatch {
			b.oob[i] = make([]byte, 128)
			b.woob[i] = make([]byte, 0, 128)
			b.r.Hdrs[i].Hdr.Control = &b.oob[i][0]
		}
	}
	return b
}

// sender is the address of the sender of query i (unmapped), and whether
// the kernel told one.
func (b *batch) sender(i int) (netip.Addr, bool) {
	ap, ok := b.r.Source(i)
	return ap.Addr(), ok
}

// serveUDP reads u until it is closed, with udpReaders readers (see
// readUDP).
func (s *Server) serveUDP(u *udpSocket, pktinfo bool) {
	fd, ok := u.acquire()
	if !ok {
		return
	}
	defer u.release()
	var wg sync.WaitGroup
	for range udpReaders(s.UDPReaders) - 1 {
		wg.Go(func() { s.readUDP(u, fd, pktinfo) })
	}
	s.readUDP(u, fd, pktinfo)
	wg.Wait()
}

// readUDP is a reader of u (whose descriptor is fd): it answers every
// query read until u is closed, reading up to udpBatch queries at once
// (recvmmsg, blocking in the kernel until one comes, then taking what is
// queued), answering them, and writing their replies at once (sendmmsg)
// to the senders' addresses as read. Batches pay under load: on loopback
// under dnsperf, the server's CPU per query went from 7.4-7.6 us with one
// read and one write per query to 4.2-6.6 us (bench/README.md, "The
// responder's own UDP loop, 2026-11-30"). The reader keeps its thread:
// without, the CPU per query rose from 5.4-5.8 us to 7.2 us (ibid.,
// "Blocking readers, 2026-11-30").
func (s *Server) readUDP(u *udpSocket, fd int, pktinfo bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	u.readers.Add(1)
	sc := &scratch{reader: true, counters: counterCache{local: true}}
	defer sc.counters.release()
	b := newBatch(pktinfo)
	var fp *flood.Producer
	if s.Flood != nil {
		fp = s.Flood.Producer(flood.SourceResponder)
		defer fp.Close()
	}
	yielded := time.Now()
	for {
		if now := time.Now(); now.Sub(yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		if pktinfo {
			for i := range udpBatch {
				b.r.Hdrs[i].Hdr.SetControllen(len(b.oob[i]))
			}
		}
		n, errno := b.r.Call(uintptr(fd), unix.MSG_WAITFORONE)
		if errno != 0 {
			if u.closed() {
				return
			}
			if errno != unix.EINTR && errno != unix.EAGAIN {
				s.Logger.Debug("gslb udp read failed", "addr", u.local.String(), "err", error(errno))
			}
			continue
		}
		k := 0
		for i := range n {
			src, ok := b.sender(i)
			if !ok {
				// No sender: the socket is shut down (Close).
				if u.closed() {
					return
				}
				continue
			}
			query := b.r.Data(i)
			resp := s.reply(sc, b.out[k], query, src, false)
			if fp != nil {
				fp.AddMessage(src, query, resp)
			}
			if len(resp) == 0 {
				continue
			}
			w := &b.wh[k].Hdr
			rh := &b.r.Hdrs[i].Hdr
			b.wiov[k].Base = &resp[0]
			b.wiov[k].SetLen(len(resp))
			w.Name, w.Namelen = rh.Name, rh.Namelen
			if pktinfo {
				oob := replyPktinfo(b.woob[k][:0], b.oob[i][:rh.Controllen])
				w.Control = nil
				w.SetControllen(0)
				if len(oob) > 0 {
					w.Control = &oob[0]
					w.SetControllen(len(oob))
				}
			}
			k++
		}
		for sent := 0; sent < k; {
			n, errno := mmsg.Send(uintptr(fd), b.wh[sent:k], 0)
			if errno != 0 || n == 0 {
				if errno == unix.EINTR {
					continue
				}
				// The reply at sent failed (sendmmsg stops at the
				// first that fails): it is dropped, the rest sent.
				var err error
				if errno != 0 {
					err = errno
				}
				s.Logger.Debug("gslb reply not sent", "client", b.senderString(sent), "err", err)
				n = 1
			}
			sent += n
		}
	}
}

// yieldEvery is how long a reader goes without yielding its P: a reader
// that blocks in recvmmsg and answers is never rescheduled by the Go
// runtime, and the runtime's monitor (sysmon) takes the P of a goroutine
// that has run on one schedule tick for 10 ms, then polls every 20 us for
// a millisecond or more before it backs off again. A reader left alone
// woke it about 2,500 times a second at 30,000 qps, 0.7-1.0 us of CPU per
// query; yielding every 8 ms (runtime.Gosched, one reschedule: with the
// thread locked, a hand-over of the P to another thread and back) keeps it
// asleep (bench/README.md, "2026-12-01 (later): the reader yields, the
// reply cache goes").
const yieldEvery = 8 * time.Millisecond

// senderString is the address a reply k is sent to, for logs.
func (b *batch) senderString(k int) string {
	w := &b.wh[k].Hdr
	if ap, ok := mmsg.AddrPort(w.Name, w.Namelen); ok {
		return ap.String()
	}
	return "?"
}
