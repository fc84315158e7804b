package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"lbdns/configs"
)

// GoBGP is the Speaker embedded in lbdnsd, on github.com/osrg/gobgp: it
// imports nothing from its peers (every route they send is rejected),
// announces only the paths it is given, and never negotiates graceful
// restart. Make one with NewGoBGP.
//
// A peer with BFD runs GoBGP's BFD only while its session is
// established, and the peer is made anew (its session state machine
// with it) whenever the session is lost. GoBGP's BFD resets the session
// when BFD goes down (an expiry, the router's down packet); when the
// session is down already, that reset waits in the session's state
// machine and ends the next session as soon as it is established ("BFD
// is down"), and BFD, going down again as the router restarts its own,
// queues another: after a stall of the host longer than BFD's detection
// time, every new session was reset within milliseconds, and the
// router's back-off kept the routes away for minutes.
type GoBGP struct {
	log     *slog.Logger
	changes chan struct{}

	mu     sync.Mutex
	srv    *server.BgpServer
	quiet  *atomic.Bool       // set while srv stops: its "failed to stop" line is ours to drop
	stop   context.CancelFunc // ends the peer watch and the BFD worker
	global globalConf
	peers  []configs.BGPPeer
	paths  map[netip.Prefix]Path
	errs   map[netip.Addr]string
	// up is whether each peer's session was established at its last
	// state event; pending are the sessions established or lost since
	// the BFD worker last looked (bfdWake has a value then).
	up      map[netip.Addr]bool
	pending []sessionEvent
	bfdWake chan struct{}

	// tcp reads the kernel's TCP MD5 counters and our unanswered SYNs
	// for diag, sampled every diagEvery by the diagnosis worker; reasons
	// is its last verdict.
	tcp     tcpReader
	now     func() time.Time
	diag    md5Diag
	reasons map[netip.Addr]peerReason
}

// diagEvery is how often the diagnosis samples the kernel.
const diagEvery = time.Second

// sessionEvent is a peer's session established (up) or lost.
type sessionEvent struct {
	addr netip.Addr
	up   bool
}

// BFD timers of a peer with bfd: intervals in microseconds (RFC 5880).
const (
	bfdInterval   = 300_000
	bfdMultiplier = 3
)

// localOnly names the policy that accepts local paths only.
const localOnly = "lbdns-local-only"

// globalConf is what a running speaker cannot change without a restart.
type globalConf struct {
	routerID netip.Addr
	as       uint32
	port     int
}

// NewGoBGP returns a speaker that logs to log (GoBGP's own messages at
// warning level and above); Configure starts it.
func NewGoBGP(log *slog.Logger) *GoBGP {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GoBGP{log: log, changes: make(chan struct{}, 1), paths: map[netip.Prefix]Path{}, errs: map[netip.Addr]string{},
		up: map[netip.Addr]bool{}, bfdWake: make(chan struct{}, 1), tcp: procTCP{root: "/proc"}, now: time.Now, reasons: map[netip.Addr]peerReason{}}
}

// PeerChanges implements Speaker.
func (g *GoBGP) PeerChanges() <-chan struct{} { return g.changes }

// Configure implements Speaker.
func (g *GoBGP) Configure(ctx context.Context, b configs.BGP) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := globalConf{routerID: b.RouterAddr, as: uint32(b.LocalAS), port: b.ListenPort}
	if g.srv != nil && g.global != want {
		g.log.Info("bgp: router id, local AS or listen port changed: restarting the speaker")
		g.stopLocked(ctx)
	}
	if g.srv == nil {
		if err := g.startLocked(ctx, want); err != nil {
			return err
		}
		for _, p := range g.paths {
			if err := g.addLocked(p); err != nil {
				return err
			}
		}
	}
	var errs []error
	for _, old := range g.peers {
		i := slices.IndexFunc(b.Peers, func(p configs.BGPPeer) bool { return p.Addr == old.Addr })
		if i >= 0 && samePeer(old, b.Peers[i]) {
			continue
		}
		if err := g.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: old.Addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("bgp: remove peer %s: %w", old.Addr, err))
		}
	}
	var kept []configs.BGPPeer
	for _, p := range b.Peers {
		i := slices.IndexFunc(g.peers, func(o configs.BGPPeer) bool { return o.Addr == p.Addr })
		if i >= 0 && samePeer(g.peers[i], p) {
			kept = append(kept, p)
			continue
		}
		delete(g.up, p.Addr)
		g.diag.forget(p.Addr) // a new password, say: the old evidence is not about it
		delete(g.reasons, p.Addr)
		if err := g.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, false)}); err != nil {
			errs = append(errs, fmt.Errorf("bgp: add peer %s: %w", p.Addr, err))
			continue
		}
		kept = append(kept, p)
	}
	g.peers = kept
	g.notify()
	return errors.Join(errs...)
}

// samePeer reports whether a and b configure the same session.
func samePeer(a, b configs.BGPPeer) bool { return a == b }

// startLocked starts a new server with want.
func (g *GoBGP) startLocked(ctx context.Context, want globalConf) error {
	lvl := &slog.LevelVar{}
	lvl.Set(slog.LevelWarn)
	quiet := new(atomic.Bool)
	srv := server.NewBgpServer(server.LoggerOption(slog.New(stopFilter{g.log.With("component", "gobgp").Handler(), quiet}), lvl))
	go srv.Serve()
	err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: want.as, RouterId: want.routerID.String(), ListenPort: int32(want.port),
	}})
	if err != nil {
		srv.Stop()
		return fmt.Errorf("bgp: start the speaker (router id %s, AS %d, port %d): %w", want.routerID, want.as, want.port, err)
	}
	// Nothing a router sends is taken nor passed on: the speaker only
	// announces the paths it is given (local ones).
	err = srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: localOnly, Statements: []*api.Statement{{
		Name:       localOnly,
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}}}})
	for _, dir := range []api.PolicyDirection{api.PolicyDirection_POLICY_DIRECTION_IMPORT, api.PolicyDirection_POLICY_DIRECTION_EXPORT} {
		if err != nil {
			break
		}
		err = srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name: "global", Direction: dir, Policies: []*api.Policy{{Name: localOnly}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
		}})
	}
	if err != nil {
		srv.Stop()
		return fmt.Errorf("bgp: set the local-only policy: %w", err)
	}
	wctx, stop := context.WithCancel(context.Background())
	err = srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
			if ev.Type != apiutil.PEER_EVENT_STATE {
				return
			}
			st := ev.Peer.State
			established := st.SessionState == bgp.BGP_FSM_ESTABLISHED
			g.mu.Lock()
			// A session that went down says why; the reasons of the
			// steps up (idle-hold-timer-expired, open-msg-received, ...)
			// are none, and an established session has none left.
			switch {
			case established:
				delete(g.errs, st.NeighborAddress)
			case st.DisconnectMessage != "" && !stepUp(st.DisconnectMessage):
				g.errs[st.NeighborAddress] = st.DisconnectMessage
			}
			if g.up[st.NeighborAddress] != established {
				g.up[st.NeighborAddress] = established
				g.pending = append(g.pending, sessionEvent{addr: st.NeighborAddress, up: established})
				select {
				case g.bfdWake <- struct{}{}:
				default:
				}
			}
			g.mu.Unlock()
			g.notify()
		},
	}, server.WatchPeer())
	if err != nil {
		stop()
		srv.Stop()
		return fmt.Errorf("bgp: watch the peers: %w", err)
	}
	g.srv, g.quiet, g.stop, g.global, g.peers = srv, quiet, stop, want, nil
	clear(g.up)
	g.pending = nil
	g.diag = md5Diag{}
	clear(g.reasons)
	go g.bfdWorker(wctx, srv)
	go g.diagWorker(wctx, srv)
	return nil
}

// diagWorker samples the kernel every diagEvery while srv runs (until
// ctx is done) and names why sessions that are not established do not
// come up (md5Diag); a change of a reason wakes PeerChanges' reader.
func (g *GoBGP) diagWorker(ctx context.Context, srv *server.BgpServer) {
	t := time.NewTicker(diagEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		if g.srv != srv {
			g.mu.Unlock()
			return
		}
		peers := make([]diagPeer, 0, len(g.peers))
		anyDown := false
		for _, p := range g.peers {
			peers = append(peers, diagPeer{Addr: p.Addr, Port: uint16(p.Port), Password: p.Password != "", Established: g.up[p.Addr]})
			anyDown = anyDown || !g.up[p.Addr]
		}
		g.mu.Unlock()
		c, err := g.tcp.Counters()
		var syns []synSent
		if anyDown {
			syns, _ = g.tcp.SynSent()
		}
		now := g.now()
		g.mu.Lock()
		if g.srv != srv {
			g.mu.Unlock()
			return
		}
		got := g.diag.observe(now, c, err == nil, syns, peers)
		changed := len(got) != len(g.reasons)
		for a, r := range got {
			changed = changed || g.reasons[a] != r
		}
		g.reasons = got
		g.mu.Unlock()
		if changed {
			g.notify()
		}
	}
}

// bfdWorker turns BFD on for a peer with bfd once its session of srv is
// established, and makes the peer anew without BFD once it is lost
// (unless it is established again by then), until ctx is done: a reset
// GoBGP's BFD asked for while the session was down dies with the old
// peer instead of ending the next session.
func (g *GoBGP) bfdWorker(ctx context.Context, srv *server.BgpServer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.bfdWake:
		}
		g.mu.Lock()
		evs := g.pending
		g.pending = nil
		for _, ev := range evs {
			if g.srv != srv || ctx.Err() != nil {
				break
			}
			g.bfdLocked(ctx, ev)
		}
		g.mu.Unlock()
	}
}

// bfdLocked follows one session event of a peer with bfd (g.mu held).
func (g *GoBGP) bfdLocked(ctx context.Context, ev sessionEvent) {
	i := slices.IndexFunc(g.peers, func(p configs.BGPPeer) bool { return p.Addr == ev.addr })
	if i < 0 || !g.peers[i].BFD {
		return
	}
	p := g.peers[i]
	if ev.up {
		if _, err := g.srv.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: apiPeer(p, true)}); err != nil {
			g.log.Warn("bgp: turn BFD on for the established session", "peer", p.Addr, "err", err)
		}
		return
	}
	if g.up[p.Addr] {
		return // established again meanwhile: it keeps its BFD
	}
	if err := g.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Addr.String()}); err != nil {
		g.log.Warn("bgp: remove the peer whose session was lost, to make it anew", "peer", p.Addr, "err", err)
		return
	}
	if err := g.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, false)}); err != nil {
		g.log.Warn("bgp: add the peer whose session was lost again", "peer", p.Addr, "err", err)
	}
}

// stopLocked closes every session and stops the server.
func (g *GoBGP) stopLocked(ctx context.Context) {
	if g.srv == nil {
		return
	}
	if len(g.paths) > 0 {
		if err := g.srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true}); err != nil {
			g.log.Warn("bgp: withdraw every path", "err", err)
		}
	}
	// No graceful restart: the routers drop what we announced at once.
	if err := g.srv.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		g.log.Warn("bgp: stop the speaker", "err", err)
	}
	// Stop stops BGP again before the rest of the server, and logs at
	// ERROR that it cannot (it is stopped already): a clean stop logs
	// no error.
	g.quiet.Store(true)
	g.srv.Stop()
	g.stop()
	g.srv, g.peers = nil, nil
	g.notify()
}

// stepUp reports whether reason is GoBGP's word for a step of a session
// coming up, not for a failure.
func stepUp(reason string) bool {
	switch reason {
	case "idle-hold-timer-expired", "new-connection", "open-msg-received", "open-msg-negotiated":
		return true
	}
	return false
}

// stopFilter is GoBGP's log handler: h, without the ERROR line its
// Stop writes after the speaker was stopped already (it stops BGP a
// second time) while quiet is set.
type stopFilter struct {
	h     slog.Handler
	quiet *atomic.Bool
}

func (f stopFilter) Enabled(ctx context.Context, l slog.Level) bool { return f.h.Enabled(ctx, l) }

func (f stopFilter) Handle(ctx context.Context, r slog.Record) error {
	if f.quiet.Load() && r.Message == "failed to stop BGP server" {
		return nil
	}
	return f.h.Handle(ctx, r)
}

func (f stopFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return stopFilter{f.h.WithAttrs(as), f.quiet}
}

func (f stopFilter) WithGroup(name string) slog.Handler {
	return stopFilter{f.h.WithGroup(name), f.quiet}
}

// notify wakes PeerChanges' reader.
func (g *GoBGP) notify() {
	select {
	case g.changes <- struct{}{}:
	default:
	}
}

// apiPeer is p as GoBGP configures it, with BFD when p has bfd and
// withBFD is set (the session is established).
func apiPeer(p configs.BGPPeer, withBFD bool) *api.Peer {
	family := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Addr.Is6() {
		family = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Addr.String(), PeerAsn: uint32(p.AS), AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(p.HoldTime.Seconds()), KeepaliveInterval: uint64(p.Keepalive.Seconds()), ConnectRetry: 5,
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: family, Enabled: true}}},
	}
	if p.Multihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	if p.BFD && withBFD {
		// 300 ms × 3: the router sees a silent host in under a second.
		ap.Bfd = &api.BfdPeerConfig{Enabled: true, DesiredMinimumTxInterval: bfdInterval, RequiredMinimumReceive: bfdInterval, DetectionMultiplier: bfdMultiplier}
	}
	return ap
}

// Announce implements Speaker.
func (g *GoBGP) Announce(ctx context.Context, paths []Path) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := make(map[netip.Prefix]Path, len(paths))
	for _, p := range paths {
		want[p.Prefix] = p
	}
	var errs []error
	for pfx, old := range g.paths {
		if _, ok := want[pfx]; ok {
			continue
		}
		if g.srv != nil {
			if err := g.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{apiPath(old, true)}}); err != nil {
				errs = append(errs, fmt.Errorf("bgp: withdraw %s: %w", pfx, err))
				continue
			}
		}
		delete(g.paths, pfx)
	}
	for _, p := range paths {
		if old, ok := g.paths[p.Prefix]; ok && old.Equal(p) {
			continue
		}
		if g.srv != nil {
			if err := g.addLocked(p); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		g.paths[p.Prefix] = p
	}
	return errors.Join(errs...)
}

// addLocked announces p (replacing the path of its prefix).
func (g *GoBGP) addLocked(p Path) error {
	if _, err := g.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{apiPath(p, false)}}); err != nil {
		return fmt.Errorf("bgp: announce %s: %w", p.Prefix, err)
	}
	return nil
}

// apiPath is p as GoBGP takes it; the next hop is left unspecified, so
// that GoBGP sets the session's local address.
func apiPath(p Path, withdraw bool) *apiutil.Path {
	nlri, _ := bgp.NewIPAddrPrefix(p.Prefix)
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	family := bgp.RF_IPv4_UC
	if p.Prefix.Addr().Is4() {
		nh, _ := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		attrs = append(attrs, nh)
	} else {
		family = bgp.RF_IPv6_UC
		mp, _ := bgp.NewPathAttributeMpReachNLRI(family, []bgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		attrs = append(attrs, mp)
	}
	if !withdraw {
		attrs = append(attrs, bgp.NewPathAttributeMultiExitDisc(p.MED))
		if len(p.Communities) > 0 {
			cs := make([]uint32, len(p.Communities))
			for i, c := range p.Communities {
				cs[i] = uint32(c)
			}
			attrs = append(attrs, bgp.NewPathAttributeCommunities(cs))
		}
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs, Withdrawal: withdraw}
}

// Peers implements Speaker.
func (g *GoBGP) Peers() []PeerStatus {
	g.mu.Lock()
	srv, peers := g.srv, slices.Clone(g.peers)
	errs := make(map[netip.Addr]string, len(g.errs))
	for k, v := range g.errs {
		errs[k] = v
	}
	reasons := make(map[netip.Addr]peerReason, len(g.reasons))
	for k, v := range g.reasons {
		reasons[k] = v
	}
	g.mu.Unlock()
	out := make([]PeerStatus, 0, len(peers))
	got := map[string]*api.Peer{}
	if srv != nil {
		_ = srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
			if p.State != nil {
				got[p.State.NeighborAddress] = p
			}
		})
	}
	for _, p := range peers {
		st := PeerStatus{Address: p.Addr, AS: uint32(p.AS), State: StateIdle, LastError: errs[p.Addr]}
		if ap := got[p.Addr.String()]; ap != nil {
			st.State = sessionState(ap.State.SessionState)
			if st.State == StateEstablished && ap.Timers != nil && ap.Timers.State != nil && ap.Timers.State.Uptime != nil {
				st.Since = ap.Timers.State.Uptime.AsTime()
			}
		}
		if r, ok := reasons[p.Addr]; ok && st.State != StateEstablished {
			st.ReasonCode, st.Reason = r.Code, r.Text
		}
		out = append(out, st)
	}
	return out
}

// sessionState names s.
func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_SESSION_STATE_CONNECT:
		return StateConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return StateActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return StateOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return StateOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return StateEstablished
	}
	return StateIdle
}

// Close implements Speaker.
func (g *GoBGP) Close(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopLocked(ctx)
	clear(g.paths)
	return nil
}

var _ Speaker = (*GoBGP)(nil)
