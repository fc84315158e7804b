package server

import (
	"net/netip"
	"runtime"
	"sync"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// udpBatch is how many queries a reader takes in one recvmmsg, and
// replies sends in one sendmmsg (at most: recvmmsg returns what is
// queued once one has come). 64 rather than 16: on the 2-CPU benchmark
// host lbdnsd's CPU per query against gdnsd's went from 0.95-1.10 to
// 0.82-0.93 (bench/README.md, session 16).
const udpBatch = 64

// mmsghdr is struct mmsghdr (recvmmsg(2), sendmmsg(2)): a message header
// and the length the kernel read or sent.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [unsafe.Sizeof(uintptr(0)) - 4]byte
}

// batch is a reader's reused storage: the headers of the queries read
// and of the replies sent, and the buffers they point at. It lives on the
// heap for the reader's life: the kernel reads and writes it.
type batch struct {
	rh    [udpBatch]mmsghdr
	wh    [udpBatch]mmsghdr
	riov  [udpBatch]unix.Iovec
	wiov  [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrInet6 // the senders; big enough for IPv4 too
	in    [udpBatch][]byte
	out   [udpBatch][]byte
	oob   [udpBatch][]byte
	woob  [udpBatch][]byte
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
		b.riov[i].Base = &b.in[i][0]
		b.riov[i].SetLen(len(b.in[i]))
		h := &b.rh[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.riov[i]
		h.SetIovlen(1)
		b.wh[i].hdr.Iov = &b.wiov[i]
		b.wh[i].hdr.SetIovlen(1)
		if pktinfo {
			b.oob[i] = make([]byte, 128)
			b.woob[i] = make([]byte, 0, 128)
			h.Control = &b.oob[i][0]
		}
	}
	return b
}

// sender is the address of the sender of query i (unmapped), and whether
// the kernel told one.
func (b *batch) sender(i int) (netip.Addr, bool) {
	sa := &b.names[i]
	switch {
	case sa.Family == unix.AF_INET && b.rh[i].hdr.Namelen >= unix.SizeofSockaddrInet4:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrFrom4(sa4.Addr), true
	case sa.Family == unix.AF_INET6 && b.rh[i].hdr.Namelen >= unix.SizeofSockaddrInet6:
		return netip.AddrFrom16(sa.Addr).Unmap(), true
	}
	return netip.Addr{}, false
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
// read and one write per query to 4.2-6.6 us (bench/README.md). The
// reader keeps its thread: without, the CPU per query rose from 5.4-5.8
// us to 7.2 us.
func (s *Server) readUDP(u *udpSocket, fd int, pktinfo bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	u.readers.Add(1)
	sc := &scratch{reader: true, counters: counterCache{local: true}}
	if !s.NoReplyCache {
		sc.cache = newReplyCache(replyCacheSlots(udpReaders(s.UDPReaders)))
	}
	defer sc.counters.release()
	b := newBatch(pktinfo)
	for {
		for i := range udpBatch {
			h := &b.rh[i].hdr
			h.Namelen = unix.SizeofSockaddrInet6
			if pktinfo {
				h.SetControllen(len(b.oob[i]))
			}
		}
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.rh[0])), udpBatch, unix.MSG_WAITFORONE, 0, 0)
		if errno != 0 {
			if u.closed() {
				return
			}
			if errno != unix.EINTR && errno != unix.EAGAIN {
				s.Logger.Debug("gslb udp read failed", "addr", u.local.String(), "err", error(errno))
			}
			continue
		}
		n := int(r)
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
			resp := s.reply(sc, b.out[k], b.in[i][:b.rh[i].len], src, false)
			if len(resp) == 0 {
				continue
			}
			w := &b.wh[k].hdr
			b.wiov[k].Base = &resp[0]
			b.wiov[k].SetLen(len(resp))
			w.Name, w.Namelen = b.rh[i].hdr.Name, b.rh[i].hdr.Namelen
			if pktinfo {
				rh := &b.rh[i].hdr
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
			r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.wh[sent])), uintptr(k-sent), 0, 0, 0)
			n := int(r)
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

// senderString is the address a reply k is sent to, for logs.
func (b *batch) senderString(k int) string {
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(b.wh[k].hdr.Name))
	p := (*[2]byte)(unsafe.Pointer(&sa.Port)) // network byte order
	port := uint16(p[0])<<8 | uint16(p[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port).String()
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port).String()
	}
	return "?"
}
