package control

import (
	"context"
	"fmt"
	"net"
)

// peer is the process at the other end of a control-socket connection, as
// the kernel reports it (SO_PEERCRED).
type peer struct {
	// Known is false when the credentials could not be read (not a Unix
	// socket, or a platform without SO_PEERCRED).
	Known bool
	UID   uint32
	PID   int32
}

// By is the requester's name stored with an override: "uid N", or
// "unknown".
func (p peer) By() string {
	if !p.Known {
		return "unknown"
	}
	return fmt.Sprintf("uid %d", p.UID)
}

// String names the peer in logs: "uid N pid P".
func (p peer) String() string {
	if !p.Known {
		return "unknown"
	}
	return fmt.Sprintf("uid %d pid %d", p.UID, p.PID)
}

// peerKey is the context key of a connection's peer.
type peerKey struct{}

// withPeer returns ctx carrying the credentials of c's peer; it is the
// control server's http.Server.ConnContext.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerKey{}, peerOf(c))
}

// peerFrom returns the peer stored by withPeer (unknown when none).
func peerFrom(ctx context.Context) peer {
	p, _ := ctx.Value(peerKey{}).(peer)
	return p
}
