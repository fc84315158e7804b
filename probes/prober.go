package probes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// DefaultIdleTimeout is how long a DNSProber keeps an unused UDP socket.
const DefaultIdleTimeout = 2 * time.Minute

// DNSProber is the DNS probe with persistent UDP sockets: it keeps at most
// one idle connected UDP socket per target address and reuses it for the
// next probe of that target, which saves the socket, connect, poller
// registration and close of a fresh socket per probe. Probe semantics are
// those of DNS.
//
// A probe takes the target's idle socket for itself (a concurrent probe of
// the same target dials its own) and gives it back only after a clean
// exchange: a reply carrying the query's ID was read, whatever the checks
// then conclude about its content. After a timeout, a cancellation, an ICMP
// error (connection refused), any other read or write error, a reply with
// a wrong ID, or a truncated reply (retried over TCP), the socket is closed,
// since a late reply could still arrive on it. A reused socket skips a
// datagram carrying the previous query's ID (a late duplicate of the last
// answer); any other wrong ID fails the probe with "id mismatch", as DNS
// does. TCP probes never reuse a connection.
//
// Idle sockets older than the idle timeout are closed by a sweep when a
// socket is given back, and all are closed by Close. Each cached socket is
// one open file: a process probing N targets over UDP holds up to N
// descriptors.
//
// The zero value is ready to use; NewDNSProber is the usual constructor.
// DNSProber is safe for concurrent use.
type DNSProber struct {
	// idleTimeout is how long an idle socket is kept (DefaultIdleTimeout
	// when zero); now is the clock (time.Now when nil). Tests set both.
	idleTimeout time.Duration
	now         func() time.Time

	dials atomic.Int64 // UDP sockets opened, for tests
	bufs  sync.Pool    // *[]byte of udpBufSize, one read each

	mu        sync.Mutex
	idle      map[netip.AddrPort]*udpSock
	lastSweep time.Time
	closed    bool
	// engines are the batch engines of IPv4 and IPv6 (StartCheck),
	// started on first use.
	engines [2]*engine
}

// udpSock is one connected UDP socket and the ID of the last query that it
// completed cleanly.
type udpSock struct {
	conn      *net.UDPConn
	lastID    uint16
	used      bool // lastID is valid
	idleSince time.Time
}

// NewDNSProber returns a DNSProber with no sockets yet. Call Close when done
// with it.
func NewDNSProber() *DNSProber {
	return &DNSProber{idleTimeout: DefaultIdleTimeout, now: time.Now}
}

// Probe is DNS with socket reuse; it has the signature of Func. After
// Close it still works, without caching. Checkers built with Deps.DNS set
// to p reuse its sockets the same way.
func (p *DNSProber) Probe(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result {
	return probeDNS(ctx, p, target, chk)
}

// Close closes every idle socket and the batch engines (ending their
// probes in flight as "canceled") and stops caching: sockets of probes in
// flight are closed when those probes end.
func (p *DNSProber) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = true
	engines := p.engines
	p.engines = [2]*engine{}
	p.mu.Unlock()
	var errs []error
	for _, e := range engines {
		if e != nil {
			if err := e.close(); err != nil {
				errs = append(errs, fmt.Errorf("close batch engine: %w", err))
			}
		}
	}
	for target, s := range idle {
		if err := s.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close socket to %s: %w", target, err))
		}
	}
	return errors.Join(errs...)
}

// exchangeUDP sends wire (the packed q) to target over a cached or fresh
// connected UDP socket and returns the reply. When a reused socket's last
// query had q's ID, q gets another ID first, so that a late duplicate of
// the last answer can never pass for the reply.
func (p *DNSProber) exchangeUDP(ctx context.Context, target netip.AddrPort, q *dns.Msg, wire []byte) ([]byte, error) {
	s, err := p.get(ctx, target)
	if err != nil {
		return nil, err
	}
	if s.used && q.Id == s.lastID {
		q.Id++
		binary.BigEndian.PutUint16(wire, q.Id)
	}
	reply, clean, err := p.exchangeOn(ctx, s, q.Id, wire)
	if clean {
		s.lastID, s.used = q.Id, true
		p.put(target, s)
	} else {
		_ = s.conn.Close()
	}
	return reply, err
}

// exchangeOn does one query on s. clean reports whether s may be reused:
// a whole header carrying id was read, without TC, and no cancellation
// touched the socket's deadline.
func (p *DNSProber) exchangeOn(ctx context.Context, s *udpSock, id uint16, wire []byte) (reply []byte, clean bool, err error) {
	// ctx always has a deadline here (probeDNS gives it one), and its Done
	// closes at that deadline; so its expiry, like a cancellation, moves
	// the socket's deadline to the past and unblocks the I/O. A clean
	// socket has no deadline, and a probe sets none: one runtime timer
	// (the context's) per probe instead of two.
	stop := context.AfterFunc(ctx, func() {
		_ = s.conn.SetDeadline(time.Unix(1, 0))
	})
	defer func() {
		// The deadline moved to the past (or is about to): the socket
		// must not serve another probe.
		if !stop() {
			clean = false
		}
	}()
	if _, err := s.conn.Write(wire); err != nil {
		return nil, false, err
	}
	for {
		reply, err := recvDatagram(s.conn, &p.bufs)
		if err != nil {
			return nil, false, err
		}
		if len(reply) < 12 {
			return reply, false, nil // "short reply"
		}
		switch got := binary.BigEndian.Uint16(reply); {
		case got == id:
			return reply, reply[2]&0x02 == 0, nil
		case s.used && got == s.lastID:
			continue // a late duplicate of the previous answer
		}
		return reply, false, nil // "id mismatch"
	}
}

// scratch returns a buffer of udpBufSize from bufs, or a new one.
func scratch(bufs *sync.Pool) *[]byte {
	if bp, ok := bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, udpBufSize)
	return &b
}

// get takes target's idle socket, or dials a new one when there is none or
// it idled too long.
func (p *DNSProber) get(ctx context.Context, target netip.AddrPort) (*udpSock, error) {
	p.mu.Lock()
	s := p.idle[target]
	if s != nil {
		delete(p.idle, target)
	}
	p.mu.Unlock()
	if s != nil {
		if p.clock().Sub(s.idleSince) <= p.idleAfter() {
			return s, nil
		}
		_ = s.conn.Close()
	}
	conn, err := dialUDP(ctx, target)
	if err != nil {
		return nil, err
	}
	p.dials.Add(1)
	return &udpSock{conn: conn}, nil
}

// put gives s back as target's idle socket, or closes it when target has
// one already or p is closed. Every quarter of the idle timeout it also
// closes the sockets idle longer than the timeout, so that targets no longer
// probed do not keep theirs.
func (p *DNSProber) put(target netip.AddrPort, s *udpSock) {
	now := p.clock()
	idleAfter := p.idleAfter()
	s.idleSince = now
	var stale []*udpSock
	p.mu.Lock()
	switch {
	case p.closed || p.idle[target] != nil:
		stale = append(stale, s)
	default:
		if p.idle == nil {
			p.idle = make(map[netip.AddrPort]*udpSock)
		}
		p.idle[target] = s
	}
	if now.Sub(p.lastSweep) >= idleAfter/4 {
		p.lastSweep = now
		for t, old := range p.idle {
			if now.Sub(old.idleSince) > idleAfter {
				delete(p.idle, t)
				stale = append(stale, old)
			}
		}
	}
	p.mu.Unlock()
	for _, old := range stale {
		_ = old.conn.Close()
	}
}

func (p *DNSProber) clock() time.Time {
	if p.now == nil {
		return time.Now()
	}
	return p.now()
}

func (p *DNSProber) idleAfter() time.Duration {
	if p.idleTimeout <= 0 {
		return DefaultIdleTimeout
	}
	return p.idleTimeout
}
