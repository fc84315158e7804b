package announce

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Reason codes of a PeerStatus: why a session that is not established
// does not come up, as far as this host can tell.
const (
	// ReasonMD5Mismatch: the kernel dropped the router's segments for
	// their TCP MD5 signature (RFC 2385) while the session was tried.
	ReasonMD5Mismatch = "md5-mismatch"
	// ReasonNoReplyPassword: our connection attempts get no reply while
	// a password is set, and nothing the router sends reaches us: an MD5
	// mismatch is the likely cause (the router's kernel drops our SYNs).
	ReasonNoReplyPassword = "no-reply-password"
	// ReasonNoReply: our connection attempts get no reply, without a
	// password here.
	ReasonNoReply = "no-reply"
)

// md5Hold is how long a reason stays after the last evidence for it
// (the router retries every few seconds; its back-off can be longer).
const md5Hold = 2 * time.Minute

// tcpCounters are the kernel's TCP MD5 counters of one network
// namespace (TcpExt of /proc/net/netstat).
type tcpCounters struct {
	// NotFound: a segment without a signature where one was expected;
	// Unexpected: a signature where none was configured; Failure: a
	// wrong signature.
	NotFound, Unexpected, Failure uint64
}

// synSent is one of our connections still in SYN_SENT.
type synSent struct {
	Remote netip.AddrPort
	// Retransmits counts the SYNs sent again for want of a reply.
	Retransmits int
}

// tcpReader reads what the diagnosis needs from the kernel, in the
// namespace the speaker runs in.
type tcpReader interface {
	// Counters returns the MD5 counters.
	Counters() (tcpCounters, error)
	// SynSent returns the connections in SYN_SENT.
	SynSent() ([]synSent, error)
}

// diagPeer is one configured peer as the diagnosis sees it.
type diagPeer struct {
	Addr        netip.Addr
	Port        uint16
	Password    bool
	Established bool
}

// peerReason is why one peer's session does not come up.
type peerReason struct {
	// Code is ReasonMD5Mismatch or a sibling; Text says it to people.
	Code, Text string
}

// md5Diag names why sessions do not come up, from the kernel's MD5
// counters and our unanswered SYNs sampled while sessions are tried.
// It is pure: the caller reads the kernel and passes the time.
type md5Diag struct {
	have  bool // prev is a sample
	prev  tcpCounters
	peers map[netip.Addr]*diagState
}

// diagState is what is known of one peer's failure.
type diagState struct {
	password bool
	// dropped counts the segments the kernel dropped that are
	// attributed to this peer (alone or among others), by counter.
	dropped map[string]uint64
	shared  []netip.Addr // the other peers down when it was seen
	md5At   time.Time    // last counter evidence
	syns    int          // the most retransmits of an unanswered SYN
	synAt   time.Time    // last unanswered SYN
}

// observe takes one sample taken at now (ok false: the counters could
// not be read) and returns the reason of every peer that has one.
func (d *md5Diag) observe(now time.Time, c tcpCounters, ok bool, syns []synSent, peers []diagPeer) map[netip.Addr]peerReason {
	if d.peers == nil {
		d.peers = map[netip.Addr]*diagState{}
	}
	// Forget the peers established, gone, or whose password changed.
	for addr, st := range d.peers {
		i := slices.IndexFunc(peers, func(p diagPeer) bool { return p.Addr == addr })
		if i < 0 || peers[i].Established || peers[i].Password != st.password {
			delete(d.peers, addr)
		}
	}
	var down []diagPeer
	for _, p := range peers {
		if !p.Established {
			down = append(down, p)
		}
	}
	if ok && d.have && len(down) > 0 {
		rose := []struct {
			name   string
			delta  uint64
			signed bool // the counter is about peers with a password
		}{
			{"TCPMD5Failure", sub(c.Failure, d.prev.Failure), true},
			{"TCPMD5NotFound", sub(c.NotFound, d.prev.NotFound), true},
			{"TCPMD5Unexpected", sub(c.Unexpected, d.prev.Unexpected), false},
		}
		for _, r := range rose {
			if r.delta == 0 {
				continue
			}
			var cands []netip.Addr
			for _, p := range down {
				if p.Password == r.signed {
					cands = append(cands, p.Addr)
				}
			}
			for _, a := range cands {
				st := d.state(a, peers)
				st.dropped[r.name] += r.delta
				st.md5At = now
				st.shared = slices.DeleteFunc(slices.Clone(cands), func(o netip.Addr) bool { return o == a })
			}
		}
	}
	for _, s := range syns {
		if s.Retransmits < 1 {
			continue
		}
		for _, p := range down {
			if p.Addr == s.Remote.Addr() && p.Port == s.Remote.Port() {
				st := d.state(p.Addr, peers)
				st.syns, st.synAt = max(st.syns, s.Retransmits), now
			}
		}
	}
	if ok {
		d.prev, d.have = c, true
	}
	out := map[netip.Addr]peerReason{}
	for addr, st := range d.peers {
		switch {
		case !st.md5At.IsZero() && now.Sub(st.md5At) < md5Hold:
			out[addr] = peerReason{Code: ReasonMD5Mismatch, Text: md5Text(addr, st)}
		case !st.synAt.IsZero() && now.Sub(st.synAt) < md5Hold && st.password:
			out[addr] = peerReason{Code: ReasonNoReplyPassword, Text: fmt.Sprintf(
				"no reply to our connection attempts while a TCP MD5 password is set (our SYN unanswered after %s, and nothing from the router dropped here): a signature mismatch is the likely cause if the router is up; check [[bgp.peer]] password against the router's", plural(st.syns, "retransmission"))}
		case !st.synAt.IsZero() && now.Sub(st.synAt) < md5Hold:
			out[addr] = peerReason{Code: ReasonNoReply, Text: fmt.Sprintf(
				"no reply to our connection attempts (our SYN unanswered after %s): the router is down, or it or a firewall drops them (a TCP MD5 password set on the router's side only does too)", plural(st.syns, "retransmission"))}
		}
	}
	return out
}

// forget drops what is known of addr (its configuration changed).
func (d *md5Diag) forget(addr netip.Addr) { delete(d.peers, addr) }

// state returns addr's state, made when new.
func (d *md5Diag) state(addr netip.Addr, peers []diagPeer) *diagState {
	st := d.peers[addr]
	if st == nil {
		i := slices.IndexFunc(peers, func(p diagPeer) bool { return p.Addr == addr })
		st = &diagState{password: i >= 0 && peers[i].Password, dropped: map[string]uint64{}}
		d.peers[addr] = st
	}
	return st
}

// md5Text says st's counter evidence for addr.
func md5Text(addr netip.Addr, st *diagState) string {
	var n uint64
	var names []string
	for _, name := range []string{"TCPMD5Failure", "TCPMD5NotFound", "TCPMD5Unexpected"} {
		if st.dropped[name] > 0 {
			n += st.dropped[name]
			names = append(names, name)
		}
	}
	var hint string
	switch {
	case len(names) == 1 && names[0] == "TCPMD5Failure":
		hint = ": it signs with another password"
	case len(names) == 1 && names[0] == "TCPMD5NotFound":
		hint = ": it sends no signature (no password on its side)"
	case len(names) == 1 && names[0] == "TCPMD5Unexpected":
		hint = ": it signs, and no password is set here"
	}
	from := addr.String()
	who := "the router"
	if len(st.shared) > 0 {
		all := []string{addr.String()}
		for _, o := range st.shared {
			all = append(all, o.String())
		}
		from = "one of " + strings.Join(all, ", ") + ", the counters are per host"
		who = "this router or another one not established"
		hint = ""
	}
	return fmt.Sprintf("TCP MD5 signature mismatch with %s%s (the kernel dropped %s from %s: %s rose); check [[bgp.peer]] password against the router's",
		who, hint, plural(int(n), "segment"), from, strings.Join(names, "/"))
}

// plural is "1 segment", "2 segments".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// sub is a-b, or 0 when the counter went back (a new namespace).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
