package etcdtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The members of a cluster on loopback talk to each other through peer
// proxies of the test kit (as etcd's own robustness tests do): member
// i's advertised peer URL is its proxy's address, which forwards every
// TCP connection to the member's own peer listener. A connection
// belongs to the member it reaches (the proxy's) and to the member that
// dialed it, found by the socket's owner in /proc (every member dials
// from 127.0.0.1, so the address cannot tell them apart). PartitionPeers
// cuts every connection of a member, both ways, and refuses new ones,
// while its client URL stays reachable.

// peerProxy forwards the connections of one member's peer URL.
type peerProxy struct {
	c      *Cluster
	owner  int // the member it forwards to
	ln     net.Listener
	target string // the member's own peer listener

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup
}

// proxyConn is one forwarded connection: from the member from (-1:
// not found) to the proxy's owner.
type proxyConn struct {
	from       int
	in, out    net.Conn
	closeOnce  sync.Once
	closedBoth chan struct{}
}

func (pc *proxyConn) close() {
	pc.closeOnce.Do(func() {
		pc.in.Close()
		pc.out.Close()
		close(pc.closedBoth)
	})
}

// startPeerProxy listens on addr and forwards to target.
func startPeerProxy(c *Cluster, owner int, addr, target string) (*peerProxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: peer proxy of m%d: %w", owner, err)
	}
	p := &peerProxy{c: c, owner: owner, ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *peerProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		from := p.c.dialer(in.RemoteAddr(), p.ln.Addr())
		if !p.c.allowed(from, p.owner) {
			in.Close() // refused while partitioned
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		pc := &proxyConn{from: from, in: in, out: out, closedBoth: make(chan struct{})}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		// A cut made between the check above and here still applies.
		if !p.c.allowed(from, p.owner) {
			p.drop(pc)
			continue
		}
		p.wg.Go(func() {
			var cp sync.WaitGroup
			cp.Go(func() { io.Copy(out, in); pc.close() })
			cp.Go(func() { io.Copy(in, out); pc.close() })
			cp.Wait()
			p.drop(pc)
		})
	}
}

func (p *peerProxy) drop(pc *proxyConn) {
	pc.close()
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// cut closes every connection that the cluster no longer allows.
func (p *peerProxy) cut() {
	p.mu.Lock()
	var drop []*proxyConn
	for pc := range p.conns {
		if !p.c.allowed(pc.from, p.owner) {
			drop = append(drop, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range drop {
		p.drop(pc)
	}
}

// close stops the proxy and every connection through it.
func (p *peerProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	var all []*proxyConn
	for pc := range p.conns {
		all = append(all, pc)
	}
	p.mu.Unlock()
	for _, pc := range all {
		pc.close()
	}
	p.wg.Wait()
}

// allowed reports whether a connection dialed by member from (-1: not
// found) to member to may pass: neither is partitioned (and, while any
// member is, a connection whose dialer is not known does not pass).
func (c *Cluster) allowed(from, to int) bool {
	c.cutMu.Lock()
	defer c.cutMu.Unlock()
	if c.cut[to] {
		return false
	}
	if from < 0 {
		return len(c.cut) == 0
	}
	return !c.cut[from]
}

// PartitionPeers cuts member i off from its peers, both ways: every
// connection between it and another member is closed and new ones are
// refused until HealPeers(i). Its client URL stays reachable (it
// answers clients as a member without a leader does). Only a cluster on
// loopback started without Options.Command has the peer proxies this
// needs.
func (c *Cluster) PartitionPeers(i int) error {
	if len(c.proxies) == 0 {
		return errors.New("etcdtest: this cluster has no peer proxies (it runs with Options.Command)")
	}
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("etcdtest: no member %d", i)
	}
	c.cutMu.Lock()
	c.cut[i] = true
	c.cutMu.Unlock()
	for _, p := range c.proxies {
		p.cut()
	}
	return nil
}

// HealPeers lets member i talk to its peers again (new connections
// pass; the members make them on their own).
func (c *Cluster) HealPeers(i int) {
	c.cutMu.Lock()
	delete(c.cut, i)
	c.cutMu.Unlock()
}

// dialer returns the member whose process owns the socket at remote
// connected to local (a proxy's address), or -1 when none is found.
func (c *Cluster) dialer(remote, local net.Addr) int {
	r, ok1 := remote.(*net.TCPAddr)
	l, ok2 := local.(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1
	}
	inode := socketInode(r.Port, l.Port)
	if inode == "" {
		return -1
	}
	want := "socket:[" + inode + "]"
	c.cutMu.Lock()
	pids := make([]int, len(c.members))
	for i, m := range c.members {
		pids[i] = -1
		if m.cmd != nil && m.cmd.Process != nil {
			pids[i] = m.cmd.Process.Pid
		}
	}
	c.cutMu.Unlock()
	for i, pid := range pids {
		if pid < 0 {
			continue
		}
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
				return i
			}
		}
	}
	return -1
}

// socketInode returns the inode of the TCP socket whose local port is
// lport and remote port rport (/proc/net/tcp and tcp6), or "".
func socketInode(lport, rport int) string {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if ino := findInode(f, lport, rport); ino != "" {
			return ino
		}
	}
	return ""
}

func findInode(file string, lport, rport int) string {
	fh, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		if port(f[1]) == lport && port(f[2]) == rport {
			return f[9]
		}
	}
	return ""
}

// port is the port of an address of /proc/net/tcp ("0100007F:1F90").
func port(addr string) int {
	_, hex, ok := strings.Cut(addr, ":")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(hex, 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}
