package announce

import (
	"context"
	"net/netip"
	"time"

	"lbdns/configs"
)

// Speaker is a BGP speaker as the Announcer drives it. Its methods are
// called from one goroutine at a time, apart from Peers and PeerChanges.
type Speaker interface {
	// Configure applies [bgp]: it starts the speaker the first time,
	// opens sessions with peers added and closes those with peers
	// removed; a change of the router id, the local AS or the listen
	// port restarts it (its sessions reopen, its paths are announced
	// again).
	Configure(ctx context.Context, b configs.BGP) error
	// Announce makes the speaker's announced paths exactly paths: new
	// ones are announced, changed ones replaced, missing ones withdrawn.
	Announce(ctx context.Context, paths []Path) error
	// Peers returns every configured peer's session, in configuration
	// order.
	Peers() []PeerStatus
	// PeerChanges returns a channel that receives (coalesced) after a
	// peer's session changes state.
	PeerChanges() <-chan struct{}
	// Close withdraws every path, closes every session (a NOTIFICATION
	// Cease, no graceful restart) and stops the speaker.
	Close(ctx context.Context) error
}

// Session states of a PeerStatus (RFC 4271 §8.2.2).
const (
	StateIdle        = "idle"
	StateConnect     = "connect"
	StateActive      = "active"
	StateOpenSent    = "opensent"
	StateOpenConfirm = "openconfirm"
	StateEstablished = "established"
)

// PeerStatus is one peer's session.
type PeerStatus struct {
	// Address and AS are the peer's, as configured.
	Address netip.Addr
	AS      uint32
	// State is the session's state (StateIdle and its siblings).
	State string
	// Since is when the session was last established (zero when it is
	// not established).
	Since time.Time
	// LastError is why the session last went down ("" when never).
	LastError string
	// ReasonCode and Reason say why a session that is not established
	// does not come up, as far as this host can tell from its kernel
	// (ReasonMD5Mismatch and its siblings; "" when nothing is known).
	ReasonCode, Reason string
}
