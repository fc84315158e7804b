//go:build linux

package responder

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"lbdns/configs"
	"lbdns/internal/fdbudget"
	"lbdns/testkit/poll"
)

// raiseNoFile raises the test process's RLIMIT_NOFILE (soft) to need at
// least, restored when the test ends; it skips the test when the hard
// limit is below need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Max < need {
		t.Skipf("needs %d descriptors (RLIMIT_NOFILE), the hard limit is %d: raise it (ulimit -Hn) to run this test", need, rl.Max)
	}
	if rl.Cur >= need {
		return
	}
	old := rl
	rl.Cur = need
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("raise RLIMIT_NOFILE to %d: %v", need, err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}

// closedByPeer reports whether the other end of c has closed it (an end
// of file or a reset waits to be read), without waiting: a connection
// still open with nothing to read is not.
func closedByPeer(c net.Conn) bool {
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	sc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
		case err != nil: // a reset
			closed = true
		default:
			closed = n == 0
		}
		return true // never wait
	})
	return closed
}

// TestDoHIdleFlood: 10,000 idle connections to the DoH front from a few
// sources, with max_connections at its default (1024) and
// max_per_source at its (64): each source's connections beyond 64 are
// closed at once and counted; meanwhile a DoH query over a new
// connection from another source, and a UDP query, are answered; the
// connections that fill max_connections are kept and the next one is
// closed at once, counted under limit.
func TestDoHIdleFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections")
	}
	const (
		flood   = 10_000
		sources = 15 // 15 × 64 = 960 kept: below max_connections
		perSrc  = configs.DefaultGSLBTLSMaxPerSource
		maxConn = configs.DefaultGSLBTLSMaxConnections
	)
	// The flood's descriptors and the server's, below the daemon's
	// descriptor reserve.
	raiseNoFile(t, flood+2*maxConn+fdbudget.DefaultReserve+512)
	f := startFronts(t, &fake{}, frontsCfg(func(c *configs.GSLBTLS) {
		c.MaxConnections, c.MaxPerSource = maxConn, perSrc
		c.HandshakeTimeout.Duration = time.Minute // idle, not slow: the caps close them, not the timeout
		c.IdleTimeout.Duration = time.Hour
	}))
	if open, limit := f.srv.doh.Open(); limit != 1024 || open != 0 {
		t.Fatalf("DoH connections %d of %d, want 0 of 1024", open, limit)
	}
	var all []net.Conn
	t.Cleanup(func() {
		for _, c := range all {
			c.Close()
		}
	})
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", f.doh)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", len(all), from, err)
		}
		all = append(all, c)
		return c
	}
	bySource := make([][]net.Conn, sources)
	for i := range flood {
		s := i % sources
		bySource[s] = append(bySource[s], dial(fmt.Sprintf("127.0.1.%d", s+1)))
	}
	fr := f.srv.Metrics.fronts
	wantPerSource := float64(flood - sources*perSrc)
	poll.Until(t, time.Minute, "the flood's connections accepted", func() (bool, string) {
		open, _ := f.srv.doh.Open()
		got := testutil.ToFloat64(fr.Refused("per_source"))
		return got == wantPerSource && open == sources*perSrc, fmt.Sprintf("refused{per_source} %v (want %v), open %d (want %d)", got, wantPerSource, open, sources*perSrc)
	})
	// Each source's first 64 are kept; every other one was closed.
	poll.Until(t, time.Minute, "the connections beyond max_per_source closed", func() (bool, string) {
		for s, cs := range bySource {
			for i, c := range cs {
				if closed := closedByPeer(c); closed != (i >= perSrc) {
					return false, fmt.Sprintf("source 127.0.1.%d, connection %d of %d: closed %v", s+1, i+1, len(cs), closed)
				}
			}
		}
		return true, ""
	})

	// Meanwhile: a DoH query over a new connection from another source,
	// and a UDP query, are answered.
	q, _ := query("www.example.test.", dns.TypeA, 0).Pack()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.2.1")}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: f.pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	honest := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if reply, resp := dohPost(t, honest, f.doh, bytes.Clone(q)); resp.StatusCode != http.StatusOK || len(answers(t, reply)) != 1 {
		t.Errorf("DoH from 127.0.2.1 during the flood: %d, %d octets", resp.StatusCode, len(reply))
	}
	if len(answers(t, udpWire(t, f.udp, bytes.Clone(q)))) != 1 {
		t.Error("no UDP answer during the flood")
	}

	// Fill max_connections (the honest connection stays open): the next
	// connection, from a source below its cap, is closed at once.
	for range maxConn - sources*perSrc - 1 {
		dial("127.0.1.16")
	}
	beyond := dial("127.0.1.17")
	poll.Until(t, time.Minute, "max_connections reached", func() (bool, string) {
		open, _ := f.srv.doh.Open()
		got := testutil.ToFloat64(fr.Refused("limit"))
		return got == 1 && open == maxConn && closedByPeer(beyond), fmt.Sprintf("refused{limit} %v, open %d, the last closed %v", got, open, closedByPeer(beyond))
	})
	if got := testutil.ToFloat64(fr.Open()); got != maxConn {
		t.Errorf("lbdns_gslb_doh_connections %v, want %d", got, maxConn)
	}
	if got := testutil.ToFloat64(fr.Refused("per_source")); got != wantPerSource {
		t.Errorf("refused{per_source} %v, want %v", got, wantPerSource)
	}
	// The honest client's connection still answers, and so does UDP.
	if reply, resp := dohPost(t, honest, f.doh, bytes.Clone(q)); resp.StatusCode != http.StatusOK || len(answers(t, reply)) != 1 {
		t.Errorf("DoH over the kept connection at max_connections: %d", resp.StatusCode)
	}
	if len(answers(t, udpWire(t, f.udp, bytes.Clone(q)))) != 1 {
		t.Error("no UDP answer at max_connections")
	}
}
