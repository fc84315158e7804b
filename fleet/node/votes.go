package node

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet"
	"lbdns/fleet/etcdfleet"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

// CanaryKind is the monitor kind of a prober's canary targets: the other
// nodes' GSLB listen addresses and [fleet] canaries, each a TCP connect.
const CanaryKind = "canary"

// canarySchedule paces the canaries: a connect every [fleet]
// canary_interval (its timeout too), down after two failures in a row,
// up after one success.
func canarySchedule(f *configs.Fleet) monitor.Schedule {
	iv := f.CanaryInterval.Duration
	return monitor.Schedule{Interval: iv, Timeout: iv, Rise: 1, Fall: 2}
}

// Verdict sources: where the GSLB answers' member states come from.
const (
	sourceFleet = "fleet"      // the probers' majority verdicts
	sourceOwn   = "own probes" // this node's own probes (etcd lost, or the fleet view not read yet)
)

// votePass bounds the wait of one pass of the votes loop on etcd.
const votePass = 2 * time.Second

// votes is this node's part in the fleet's majority verdicts: it
// follows the fleet view and the votes, probes only the GSLB members
// assigned to it (and the canaries), publishes its votes, and gives the
// GSLB responder the fleet's verdicts in place of its own facts. When
// etcd has not answered for longer than the lease TTL (the bound after
// which this node's votes are gone from etcd) it judges every member
// from its own probes, and probes them all.
type votes struct {
	n     *Node
	k     int
	rules fleet.Rules // the vote's hold and up share ([fleet] vote_hold, up_vote_percent)
	// beat wakes the heartbeat (a new Withdrawn or Canary).
	beat chan struct{}

	// imu guards the interface addresses read for the canaries, ifsAt
	// when.
	imu   sync.Mutex
	ifs   []netip.Addr
	ifsAt time.Time

	// tmu serializes monitor updates: all is every target of the
	// configuration in force, filtered on each update.
	tmu sync.Mutex
	all []monitor.Target

	mu        sync.Mutex
	follower  *etcdfleet.Follower
	mine      map[string]bool // the members this node probes; nil: every member
	canaries  []string        // the canaries' addresses, sorted, without its own
	own       []string        // the candidate canaries left out as its own
	chosen    netip.AddrPort  // the canary it advertises (invalid: none)
	chosenWhy string          // how chosen was chosen, or why there is none
	counted   bool            // canaries counted over a fleet view read
	withdrawn bool
	source    string
	why       string // why the source is own probes
	views     map[string]fleet.MemberView
	decisions map[string]fleet.Decision
	live      []fleet.Prober
	writes    uint64 // vote writes (puts and deletes) this node made

	// seen is the fleet view's nodes at the last step (step only), for
	// the journal's joins and departures; nil before the first load.
	seen []fleet.Node
	// forced is the forced member states last published (step only).
	forced gslb.ForcedStates
}

// newVotes returns the votes of node n.
func newVotes(n *Node) *votes {
	return &votes{n: n, k: n.cfg.ProbersPerMember, rules: fleet.Rules{Hold: n.cfg.VoteHold.Duration, UpPercent: n.cfg.UpVotePercent}, beat: make(chan struct{}, 1),
		source: sourceOwn, why: "the fleet view is not read yet", decisions: map[string]fleet.Decision{}}
}

// memberKey is a member's name in the fleet: "POOL/MEMBER".
func memberKey(pool, member string) string { return gslb.MemberKey(pool, member) }

// members lists cfg's GSLB members as memberKey, in configuration order.
func members(cfg *configs.Config) []string {
	if cfg == nil {
		return nil
	}
	var out []string
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		for j := range p.Members {
			out = append(out, memberKey(p.Name, p.Members[j].Name))
		}
	}
	return out
}

// updateTargets gives the monitor the targets of the configuration in
// force: the GSLB members assigned to this node and its canaries beside
// the other targets.
func (v *votes) updateTargets(targets []monitor.Target) {
	v.tmu.Lock()
	defer v.tmu.Unlock()
	v.all = targets
	v.applyTargetsLocked()
}

// applyTargets filters the targets again (the assignment or the canaries
// changed).
func (v *votes) applyTargets() {
	v.tmu.Lock()
	defer v.tmu.Unlock()
	v.applyTargetsLocked()
}

func (v *votes) applyTargetsLocked() {
	v.mu.Lock()
	mine, canaries := v.mine, v.canaries
	v.mu.Unlock()
	out := make([]monitor.Target, 0, len(v.all)+len(canaries))
	for _, t := range v.all {
		if t.Key.Kind != gslb.MonitorKind || mine == nil || mine[memberKey(t.Key.Owner, t.Key.Member)] {
			out = append(out, t)
		}
	}
	for _, a := range canaries {
		t, err := v.canaryTarget(a)
		if err != nil {
			v.n.log.Warn("cannot build a canary's check; left out", "canary", a, "err", err)
			continue
		}
		out = append(out, t)
	}
	v.n.o.Monitor.Update(out)
}

// canaryTarget is the TCP connect check of canary addr ("ADDR:PORT").
func (v *votes) canaryTarget(addr string) (monitor.Target, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return monitor.Target{}, err
	}
	s := canarySchedule(v.n.cfg)
	chk := &configs.Check{Name: "canary", Kind: "tcp", Interval: configs.Duration{Duration: s.Interval}, Timeout: configs.Duration{Duration: s.Timeout},
		Rise: s.Rise, Fall: s.Fall, TCP: &configs.TCPCheck{Port: int(ap.Port()), MaxRead: configs.DefaultTCPMaxRead}}
	c, err := v.n.o.Checkers(chk, ap)
	if err != nil {
		return monitor.Target{}, err
	}
	return monitor.Target{Key: monitor.Key{Kind: CanaryKind, Member: addr, Check: "tcp"}, Addr: ap, Schedule: s, Checker: c, Spec: "tcp-connect"}, nil
}

// interfaceAddrs reads this host's interface addresses: those of the
// interfaces other than loopback first (an anycast address is often
// kept on the loopback interface), each interface's in its order.
func interfaceAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("read the interfaces: %w", err)
	}
	var out, lo []netip.Addr
	for _, i := range ifs {
		as, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("read the addresses of interface %s: %w", i.Name, err)
		}
		for _, a := range as {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if i.Flags&net.FlagLoopback != 0 {
				lo = append(lo, p.Addr())
			} else {
				out = append(out, p.Addr())
			}
		}
	}
	return append(out, lo...), nil
}

// interfacesEvery bounds how often the interface addresses are read
// again for the canaries.
const interfacesEvery = 10 * time.Second

// canaryHost is what this node knows of its own addresses for its
// canaries (fleet.CanaryHost) under cfg: canary_address, the GSLB
// listen addresses, the status endpoint as bound, the shared addresses
// (the VIPs, and the listen addresses with [bgp]: announced, anycast)
// and its interface addresses, read again at most every
// interfacesEvery.
func (v *votes) canaryHost(cfg *configs.Config) fleet.CanaryHost {
	h := fleet.CanaryHost{Configured: v.n.cfg.CanaryAddr}
	if a, err := netip.ParseAddrPort(v.n.o.StatusAddr()); err == nil {
		h.Status = a
	}
	if cfg != nil {
		h.Listen = cfg.GSLB.Server.ListenAddrs
		for _, x := range cfg.VIPs {
			if x.Addr.IsValid() {
				h.Shared = append(h.Shared, x.Addr.Unmap())
			}
		}
		if cfg.BGP.Enabled {
			for _, l := range h.Listen {
				h.Shared = append(h.Shared, l.Addr().Unmap())
			}
		}
	}
	now := v.n.o.Now()
	v.imu.Lock()
	defer v.imu.Unlock()
	if v.ifsAt.IsZero() || now.Sub(v.ifsAt) >= interfacesEvery || now.Before(v.ifsAt) {
		ifs, err := v.n.o.InterfaceAddrs()
		if err != nil {
			v.n.log.Warn("cannot read this host's interface addresses for the canaries; keeping the last read", "err", err)
		} else {
			v.ifs = ifs
		}
		v.ifsAt = now
	}
	h.Interfaces = v.ifs
	return h
}

// advertised returns the canary this node advertises in its heartbeat
// (fleet.ChooseCanary; "" when none) and how many canaries it probes
// (nil before its first pass).
func (v *votes) advertised(cfg *configs.Config) (string, *int) {
	if v == nil {
		return "", nil
	}
	c, _ := fleet.ChooseCanary(v.canaryHost(cfg))
	v.mu.Lock()
	defer v.mu.Unlock()
	var n *int
	if v.counted {
		n = new(len(v.canaries))
	}
	if !c.IsValid() {
		return "", n
	}
	return c.String(), n
}

// run follows the fleet and keeps this node's votes until ctx is
// done.
func (v *votes) run(ctx context.Context) {
	f := etcdfleet.Follow(ctx, v.n.cli, etcdfleet.FollowOptions{Prefix: v.n.cfg.Prefix, Check: max(v.n.cfg.LeaseTTL.Duration/4, 250*time.Millisecond),
		Logger: v.n.log, Now: v.n.o.Now})
	v.mu.Lock()
	v.follower = f
	v.mu.Unlock()
	tick := time.NewTicker(500 * time.Millisecond) // the hold's end, the bound on etcd's silence
	defer tick.Stop()
	var facts uint64
	for {
		select {
		case <-ctx.Done():
			<-f.Done()
			return
		case <-f.Changed():
		case <-v.n.o.Hub.Facts.Changed(facts):
		case <-tick.C:
		}
		facts = v.n.o.Hub.Facts.Version()
		v.step(ctx, f.View())
	}
}

// step is one pass: the source of the verdicts, the canaries, the
// assignment, this node's votes and the fleet's verdicts.
func (v *votes) step(ctx context.Context, view etcdfleet.FleetView) {
	now := v.n.o.Now()
	cfg, _ := v.n.o.Hub.Config.Load()
	self := v.n.cfg.Name
	ms := members(cfg)
	hb := v.n.hb.Load()
	// ownFacts reads this node's own statuses (a copy of every target's)
	// at most once a step, and only when a part of the step needs them.
	var ownSt map[monitor.Key]monitor.TargetStatus
	ownFacts := func() map[monitor.Key]monitor.TargetStatus {
		if ownSt == nil {
			ownSt = v.n.o.Monitor.Status()
		}
		return ownSt
	}

	if view.Loaded {
		if v.seen != nil {
			v.n.o.Journal.FleetMembership(fleet.Membership(v.seen, view.Nodes))
		}
		v.seen = append(view.Nodes[:0:0], view.Nodes...)
		if v.seen == nil {
			v.seen = []fleet.Node{}
		}
	}
	reachable := view.Loaded && now.Sub(view.Contact) <= v.n.cfg.LeaseTTL.Duration
	source, why := sourceFleet, ""
	switch {
	case !view.Loaded:
		source, why = sourceOwn, "the fleet view is not read yet"
	case !reachable:
		source, why = sourceOwn, fmt.Sprintf("etcd has not answered for %s (more than the lease TTL, %s)", now.Sub(view.Contact).Round(time.Second), v.n.cfg.LeaseTTL.Duration)
	}

	// Canaries: the configured ones and the other nodes' addresses,
	// without this node's own (it never probes itself as a canary).
	host := v.canaryHost(cfg)
	chosen, chosenWhy := fleet.ChooseCanary(host)
	candidates := slices.Clone(v.n.cfg.Canaries)
	for _, n := range view.Nodes {
		if n.Name != self && n.Canary != "" {
			candidates = append(candidates, n.Canary)
		}
	}
	canaries, own := fleet.Canaries(host, chosen, candidates)
	// Cut off while most canaries are down; one without a verdict yet
	// (a node just started) is no failure.
	down, total := 0, 0
	var canaryOK []time.Time
	v.n.o.Monitor.EachKind(CanaryKind, func(ts monitor.TargetStatus) {
		canaryOK = append(canaryOK, ts.Health.LastOK)
		total++
		if ts.Health.State == health.Down {
			down++
		}
	})
	withdrawn := fleet.CutOff(total-down, total)

	live := fleet.Live(view.Nodes)
	v.mu.Lock()
	mine := v.mine
	inLive := slices.ContainsFunc(live, func(p fleet.Prober) bool { return p.Name == self })
	switch {
	case source == sourceOwn:
		mine = nil // judge every member from its own probes
	case withdrawn:
		// Cut off: it votes nothing, and keeps probing what it probes,
		// so that its facts are warm when its canaries answer again.
	case inLive:
		was := v.mine
		mine = map[string]bool{}
		for _, m := range fleet.Probing(ms, live, v.k, self, view.Votes, func(m string) bool { return was == nil || was[m] }) {
			mine[m] = true
		}
	} // else: not seen live yet (behind on intent): keep probing what it probes
	retarget := !maps.Equal(mine, v.mine) || (mine == nil) != (v.mine == nil) || !slices.Equal(canaries, v.canaries)
	rebeat := withdrawn != v.withdrawn || !v.counted || len(canaries) != len(v.canaries) || chosen != v.chosen
	v.tellCanaries(view.Loaded, chosen, chosenWhy, canaries, own)
	if withdrawn != v.withdrawn {
		if withdrawn {
			v.n.log.Warn("most canaries fail: this prober withdraws its votes (a prober cut off from the members is no down vote)", "canaries_down", down, "canaries", total)
		} else {
			v.n.log.Info("the canaries answer again: this prober votes again", "canaries_down", down, "canaries", total)
		}
	}
	if source != v.source {
		if source == sourceOwn {
			v.n.log.Warn("GSLB members are judged from this node's own probes, not the fleet's votes", "why", why)
		} else {
			v.n.log.Info("GSLB members are judged by the fleet's votes again")
		}
	}
	v.mine, v.canaries, v.withdrawn, v.live = mine, canaries, withdrawn, live
	v.chosen, v.chosenWhy, v.own, v.counted = chosen, chosenWhy, own, view.Loaded || v.counted
	v.mu.Unlock()
	if retarget {
		v.applyTargets()
	}
	if rebeat {
		select {
		case v.beat <- struct{}{}:
		default:
		}
	}

	// This node's votes: its own rise/fall state of each member it
	// probes; none while withdrawn or while etcd does not answer.
	if hb != nil && reachable {
		vctx, cancel := context.WithTimeout(ctx, votePass)
		if withdrawn {
			if n := hb.Voted(); n > 0 {
				if err := hb.Withdraw(vctx); err != nil {
					v.n.log.Warn("cannot withdraw the votes", "err", err)
				}
				v.addWrites(n)
			}
		} else {
			v.vote(vctx, hb, cfg, mine, canaryOK, ownFacts())
		}
		cancel()
	}

	// The fleet's verdicts.
	v.mu.Lock()
	views := fleet.Judge(ms, live, v.k, view.Votes, v.decisions, v.rules, now)
	decisions := make(map[string]fleet.Decision, len(views))
	for m, mv := range views {
		decisions[m] = mv.Decision
	}
	v.views, v.decisions, v.source, v.why = views, decisions, source, why
	v.mu.Unlock()
	var st map[monitor.Key]monitor.TargetStatus // this node's own facts: read only judging from its own probes
	if source != sourceFleet {
		st = ownFacts()
	}
	if forced := forcedStates(cfg, st, source, views); !sameForced(forced, v.forced) {
		v.forced = forced
		v.n.o.Hub.Forced.Publish(forced) // the responder rebuilds from the new verdicts
	}
}

// tellCanaries logs, under v.mu, what changed of this node's canaries:
// the canary it advertises (loudly when none), the canaries left out
// as its own, and, once the fleet view is read, fewer than
// fleet.MinCanaries canaries to probe.
func (v *votes) tellCanaries(loaded bool, chosen netip.AddrPort, why string, canaries, own []string) {
	if chosen != v.chosen || why != v.chosenWhy {
		if chosen.IsValid() {
			v.n.log.Info("this node's canary, probed by the other nodes", "canary", chosen.String(), "from", why)
		} else {
			v.n.log.Warn("this node advertises no canary: the other nodes cannot use it as one", "why", why)
		}
	}
	if !slices.Equal(own, v.own) && len(own) > 0 {
		v.n.log.Warn("canaries that are this node itself are left out (a node never probes itself as a canary; a shared anycast address is every node's own)", "own", strings.Join(own, " "))
	}
	few := len(canaries) < fleet.MinCanaries
	if loaded && few && (!v.counted || len(v.canaries) >= fleet.MinCanaries || len(canaries) != len(v.canaries)) {
		v.n.log.Warn("fewer than 2 canaries beyond this node: it cannot tell that it is cut off from the members (configure [fleet] canaries, or give each node a unicast canary_address)",
			"canaries", len(canaries), "left_out_as_own", len(own))
	} else if loaded && !few && v.counted && len(v.canaries) < fleet.MinCanaries {
		v.n.log.Info("enough canaries beyond this node again", "canaries", len(canaries))
	}
}

// vote publishes this node's vote on every member it probes whose own
// state is decided, and deletes its votes on the others. A down vote
// waits until most canaries answered after the member went down
// (fleet.DownConfirmed over canaryOK, each canary's last success).
func (v *votes) vote(ctx context.Context, hb *etcdfleet.Heartbeater, cfg *configs.Config, mine map[string]bool, canaryOK []time.Time, own map[monitor.Key]monitor.TargetStatus) {
	if cfg == nil {
		return
	}
	writes := 0
	for _, p := range gslb.Evaluate(cfg, own, v.n.o.Now()) { // this node's own probes: no forced state
		for _, m := range p.Members {
			key := memberKey(p.Name, m.Name)
			var wrote bool
			var err error
			switch {
			case mine != nil && !mine[key]:
				wrote, err = hb.Unvote(ctx, key)
			case m.State == health.Unknown || m.State == health.Down && !fleet.DownConfirmed(canaryOK, m.Since):
				continue // no verdict of its own yet, or its own network not confirmed
			default:
				wrote, err = hb.VoteChanged(ctx, key, m.State == health.Up)
			}
			if err != nil {
				// The next pass writes what is left (etcd slow or gone:
				// one warning per pass, not one per member).
				v.n.log.Warn("cannot write this node's votes; the next pass tries again", "member", key, "err", err)
				v.addWrites(writes)
				return
			}
			if wrote {
				writes++
			}
		}
	}
	v.addWrites(writes)
}

func (v *votes) addWrites(n int) {
	v.mu.Lock()
	v.writes += uint64(n)
	v.mu.Unlock()
}

// forcedStates are the member states the fleet forces over this
// node's own facts (st): every member the fleet has a verdict on, judged
// by that verdict; a member without one keeps this node's own facts when
// it probes it, else it has none (unknown: no verdict yet, as before the
// first probe round). Judging from its own probes (source own, etcd
// lost), the node keeps the last fleet verdict of a member only until
// its own monitors have judged it (one it did not probe before): the
// answers do not lose it while its first probes run.
func forcedStates(cfg *configs.Config, st map[monitor.Key]monitor.TargetStatus, source string, views map[string]fleet.MemberView) gslb.ForcedStates {
	if cfg == nil || source != sourceFleet && len(views) == 0 {
		return nil
	}
	own := source != sourceFleet
	out := gslb.ForcedStates{}
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		for j := range p.Members {
			m := &p.Members[j]
			mv, ok := views[memberKey(p.Name, m.Name)]
			if !ok || mv.Decision.Verdict == fleet.VerdictNone || own && judged(st, p, m) {
				continue
			}
			state := health.Up
			if mv.Decision.Verdict == fleet.VerdictDown {
				state = health.Down
			}
			reason := fmt.Sprintf("fleet verdict %s: %d up, %d down of %d probers", mv.Decision.Verdict, mv.Decision.Up, mv.Decision.Down, len(mv.Probers))
			if mv.Decision.Held {
				reason += " (held)"
			}
			out[memberKey(p.Name, m.Name)] = gslb.Forced{State: state, Since: mv.Decision.Since, By: sourceFleet, Reason: reason}
		}
	}
	return out
}

// sameForced reports whether a and b force the same states.
func sameForced(a, b gslb.ForcedStates) bool {
	return a != nil == (b != nil) && maps.EqualFunc(a, b, func(x, y gslb.Forced) bool {
		return x.State == y.State && x.Since.Equal(y.Since) && x.By == y.By && x.Reason == y.Reason
	})
}

// judged reports whether one of member m's monitors has a verdict of
// its own in st.
func judged(st map[monitor.Key]monitor.TargetStatus, p *configs.GSLBPool, m *configs.GSLBMember) bool {
	for _, name := range p.MemberMonitors(m) {
		if ts, ok := st[gslb.MonitorKey(p.Name, m.Name, name)]; ok && ts.Health.State != health.Unknown {
			return true
		}
	}
	return false
}

// withdrawnNow reports whether this node withdrew its votes.
func (v *votes) withdrawnNow() bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.withdrawn
}

// memberVotes returns the fleet's view of member key (false when none).
func (v *votes) memberVotes(key string) (fleet.MemberView, string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	mv, ok := v.views[key]
	return mv, v.source, ok
}

// votesState is what /v1/fleet and the metrics say of the votes.
type votesState struct {
	source, why     string
	withdrawn       bool
	probed, members int
	canaries        int
	canary          netip.AddrPort // the canary it advertises
	canaryWhy       string         // how it was chosen, or why none
	own             []string       // candidates left out as its own
	counted         bool
	live            []fleet.Prober
	writes          uint64
	contact         time.Time
}

// state returns the votes' state now.
func (v *votes) state() votesState {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := votesState{source: v.source, why: v.why, withdrawn: v.withdrawn, members: len(v.views), canaries: len(v.canaries),
		live: v.live, writes: v.writes, probed: len(v.mine), canary: v.chosen, canaryWhy: v.chosenWhy, own: v.own, counted: v.counted}
	if v.mine == nil {
		s.probed = len(v.views)
	}
	if v.follower != nil {
		s.contact = v.follower.Contact()
	}
	return s
}

// verdictCounts counts the members by fleet verdict ("up", "down",
// "held", "none").
func (v *votes) verdictCounts() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]int{"up": 0, "down": 0, "held": 0, "none": 0}
	for _, mv := range v.views {
		switch {
		case mv.Decision.Held:
			out["held"]++
		default:
			out[mv.Decision.Verdict.String()]++
		}
	}
	return out
}

// fillStatus adds the votes' state to the fleet status.
func (v *votes) fillStatus(st *control.FleetStatus) {
	s := v.state()
	st.Verdicts, st.VerdictsWhy, st.EtcdContact, st.Withdrawn = s.source, s.why, s.contact, s.withdrawn
	st.ProbersPerMember, st.ProbedMembers, st.Members, st.Canaries, st.VoteWrites = v.k, s.probed, s.members, s.canaries, s.writes
	for _, p := range s.live {
		st.Probers = append(st.Probers, p.Name)
	}
	if s.canary.IsValid() {
		st.CanaryAddress = s.canary.String()
	}
	st.CanaryFrom, st.CanariesOwn = s.canaryWhy, s.own
	if s.counted && s.canaries < fleet.MinCanaries {
		st.CanaryWarnings = append(st.CanaryWarnings, fleet.FewCanaries("this node ("+v.n.cfg.Name+")", s.canaries))
	}
}

// fillMembers adds the fleet's verdict and votes to every member of
// pools (nothing outside a fleet).
func (v *votes) fillMembers(pools []control.GSLBPool) {
	if v == nil {
		return
	}
	for i := range pools {
		for j := range pools[i].Members {
			m := &pools[i].Members[j]
			mv, source, ok := v.memberVotes(memberKey(pools[i].Name, m.Name))
			if !ok {
				m.Fleet = &control.GSLBFleetVerdict{Source: source, Verdict: fleet.VerdictNone.String(), Probers: []control.GSLBProber{}, Votes: []control.GSLBVote{}}
				continue
			}
			f := &control.GSLBFleetVerdict{Source: source, Verdict: mv.Decision.Verdict.String(), Held: mv.Decision.Held, Decided: mv.Decision.Decided.UTC(),
				Quorum: fleet.Quorum(len(mv.Probers)), Probers: make([]control.GSLBProber, 0, len(mv.Probers)), Votes: make([]control.GSLBVote, 0, len(mv.Votes))}
			if mv.Decision.Decided.IsZero() {
				f.Decided = time.Time{}
			}
			for _, p := range mv.Probers {
				f.Probers = append(f.Probers, control.GSLBProber{Name: p.Name, Location: p.Location})
			}
			for _, x := range mv.Votes {
				f.Votes = append(f.Votes, control.GSLBVote{Prober: x.Prober, Location: x.Location, Up: x.Up, At: x.At.UTC()})
			}
			m.Fleet = f
		}
	}
}

// collectors are the votes' metrics.
func (v *votes) collectors() []prometheus.Collector {
	gauge := func(name, help string, f func(votesState) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(v.state()) })
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	return []prometheus.Collector{
		gauge("lbdns_fleet_own_verdicts", "1 while this node judges the GSLB members from its own probes (etcd unreachable for longer than the lease TTL, or the fleet view not read yet), 0 while it answers from the fleet's verdicts.",
			func(s votesState) float64 { return bit(s.source != sourceFleet) }),
		gauge("lbdns_fleet_votes_withdrawn", "1 while this node withdrew its votes because most of its canaries fail.",
			func(s votesState) float64 { return bit(s.withdrawn) }),
		gauge("lbdns_fleet_probed_members", "The GSLB members this node probes (its assignment; every member while it judges from its own probes).",
			func(s votesState) float64 { return float64(s.probed) }),
		gauge("lbdns_fleet_live_probers", "The live probers of the fleet view (heartbeat alive, intent current, votes not withdrawn).",
			func(s votesState) float64 { return float64(len(s.live)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lbdns_fleet_vote_writes_total", Help: "Vote writes (puts and deletes) this node made to etcd: votes are written only when they change."},
			func() float64 { return float64(v.state().writes) }),
		&verdictCollector{v: v},
	}
}

// verdictCollector exports the members by fleet verdict.
type verdictCollector struct{ v *votes }

var verdictDesc = prometheus.NewDesc("lbdns_fleet_member_verdicts", "The GSLB members by the fleet's verdict: up, down, held (the votes decide nothing and the last verdict is held), none.", []string{"verdict"}, nil)

func (c *verdictCollector) Describe(ch chan<- *prometheus.Desc) { ch <- verdictDesc }

func (c *verdictCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.v.verdictCounts()
	for _, verdict := range []string{"up", "down", "held", "none"} {
		ch <- prometheus.MustNewConstMetric(verdictDesc, prometheus.GaugeValue, float64(counts[verdict]), verdict)
	}
}
