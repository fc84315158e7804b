package report

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/resolvers"
	"lbdns/vip"

	"github.com/miekg/dns"
)

// Journal tells what happened to the daemon, each happening in one
// wording: a log line, an entry of the event log (lbctl events) and, where
// one exists, a counter. The daemon calls one method per happening with
// the domain values; the wording lives here.
type Journal struct {
	log     *slog.Logger
	events  *control.EventLog
	metrics *Metrics
	// dryRun is set by Started: in a dry run nothing was applied, so the
	// stop messages say so instead of "left in place".
	dryRun bool
	// noIPVS is set by Started on a host without IPVS (no [[vip]]).
	noIPVS bool
}

// NewJournal returns a Journal that logs to log, appends to events and
// counts in m.
func NewJournal(log *slog.Logger, events *control.EventLog, m *Metrics) *Journal {
	return &Journal{log: log, events: events, metrics: m}
}

// event appends ev to the event log.
func (j *Journal) event(ev control.Event) { j.events.Append(ev) }

// StateChange tells a back end's health state change (a monitor event)
// and counts it: a resolver's in lbdns_backend_transitions_total, a GSLB
// member monitor's in lbdns_gslb_transitions_total (other keys are told,
// not counted).
func (j *Journal) StateChange(ev monitor.Event) {
	tr := ev.Transition
	id := ev.Key.String()
	k, isResolver := resolvers.TargetKeyOf(ev.Key)
	if isResolver {
		id = k.String()
	}
	j.log.Info("backend state change", "target", id, "addr", probedText(ev.Addr),
		"from", tr.From.String(), "to", tr.To.String(), "reason", tr.Reason, "rtt", ev.Result.RTT.String())
	e := control.Event{Kind: control.EventState, Subject: id, Error: tr.To == health.Down,
		Message: fmt.Sprintf("%s -> %s: %s (rtt %s)", tr.From, tr.To, tr.Reason, ev.Result.RTT.Round(time.Microsecond))}
	switch tr.To {
	case health.Up:
		e.Verdict = control.VerdictUp
		if tr.From == health.Unknown {
			e.Routine = control.RoutineFirstUp
		}
	case health.Down:
		e.Verdict = control.VerdictDown
	}
	j.event(e)
	switch {
	case isResolver:
		j.metrics.Transition(k.Resolver, k.Check, tr.To)
	case ev.Key.Kind == gslb.MonitorKind:
		j.metrics.GSLBTransition(ev.Key.Owner, ev.Key.Member, ev.Key.Check, tr.To)
	}
}

// probedText is the address a target probes as logs show it: without a
// port for a kind that has none (icmp).
func probedText(a netip.AddrPort) string {
	if a.Port() == 0 {
		return a.Addr().String()
	}
	return a.String()
}

// Verdicts tells the pool verdicts that changed, each at the level its
// diagnosis deserves: a pool without facts is a warning, a pool failing
// open or failing vendor-wide (or worse) an error.
func (j *Journal) Verdicts(ctx context.Context, events []resolvers.Event) {
	for _, ev := range events {
		lvl := slog.LevelInfo
		switch {
		case ev.To == resolvers.NoFacts:
			lvl = slog.LevelWarn
		case ev.FailOpen || ev.To >= resolvers.VendorWide:
			lvl = slog.LevelError
		}
		j.log.Log(ctx, lvl, "pool verdict", "pool", ev.Pool, "from", ev.From.String(), "to", ev.To.String(),
			"fail_open", ev.FailOpen, "detail", ev.Detail)
		j.event(control.Event{Kind: control.EventPool, Subject: ev.Pool, Message: ev.String(), Error: lvl == slog.LevelError,
			Verdict: poolVerdict(ev)})
	}
}

// poolVerdict is how a pool stands after ev: up when healthy, down when
// failing open or failing vendor-wide (or worse), warn in between
// (degraded, no facts yet).
func poolVerdict(ev resolvers.Event) string {
	switch {
	case ev.FailOpen || ev.To >= resolvers.VendorWide && ev.To != resolvers.NoFacts:
		return control.VerdictDown
	case ev.To == resolvers.Healthy:
		return control.VerdictUp
	}
	return control.VerdictWarn
}

// IPVSOps tells and counts the IPVS operations of one sync: applied, or
// in a dry run computed and NOT applied.
func (j *Journal) IPVSOps(ops []vip.Op, dryRun bool) {
	for _, op := range ops {
		msg, routine := op.String(), control.RoutineIPVS
		if dryRun {
			routine = control.RoutineIPVSDryRun
			j.log.Info("ipvs op (dry-run, NOT applied)", "op", msg)
			msg += " (dry-run, NOT applied)"
		} else {
			j.log.Info("ipvs op applied", "op", msg)
		}
		j.event(control.Event{Kind: control.EventIPVS, Subject: op.Service.Key.String(), Message: msg, Routine: routine})
		j.metrics.IPVSOp(op)
	}
}

// SyncFailed tells that bringing the IPVS table to the plan failed with
// err (retried at the next tick); errorsTotal is the reconciler's count of
// failed attempts so far.
func (j *Journal) SyncFailed(err error, errorsTotal uint64) {
	j.log.Error("ipvs sync failed; will retry", "err", err, "errors_total", errorsTotal)
	j.event(control.Event{Kind: control.EventIPVS, Subject: "sync", Error: true, Message: "ipvs sync failed; will retry: " + err.Error()})
}

// Warm tells that the warm-up is over; decided tells whether every target
// had its first verdict by then.
func (j *Journal) Warm(decided bool) {
	j.log.Info("warm-up over; reconciling IPVS table", "all_targets_decided", decided)
}

// ReloadApplied tells that the configuration file at path was reloaded
// and cfg is now in force.
func (j *Journal) ReloadApplied(path string, cfg *configs.Config) {
	j.log.Info("config reloaded", "config", path, "summary", cfg.Summary())
	j.event(control.Event{Kind: control.EventReload, Subject: path, Message: "config reloaded: " + cfg.Summary()})
}

// ReloadRejected tells that the configuration file at path was rejected
// with err (its problems counted, the first line quoted) and the running
// configuration stays.
func (j *Journal) ReloadRejected(path string, err error) {
	j.log.Error("reload rejected; running config unchanged", "config", path, "err", err)
	n := max(len(configs.Problems(err)), 1)
	first, _, _ := strings.Cut(err.Error(), "\n")
	j.event(control.Event{Kind: control.EventReload, Subject: path, Error: true,
		Message: fmt.Sprintf("reload rejected (%d problems), running config unchanged: %s", n, first)})
}

// ConfigWarnings logs, as warnings, what the configuration cfg was
// accepted with but the operator should hear of (configs.Config.Warnings:
// keys without effect), one line each with its file, line and key.
func (j *Journal) ConfigWarnings(cfg *configs.Config) {
	for _, w := range cfg.Warnings {
		j.log.Warn("config warning", "config", w.File, "line", w.Line, "key", w.Key, "value", w.Value, "warning", w.Msg)
	}
}

// RestartOnlyKept warns that a reloaded configuration changed keys that
// take effect only at a restart, and that running's stay in force
// (configs.Config.KeepRestartOnly).
func (j *Journal) RestartOnlyKept(running *configs.Config) {
	j.log.Warn("daemon.state_dir, daemon.control_socket, daemon.status_listen, daemon.status_max_requests, actions.nft_table, [fleet] and [dnstap] take effect at the next restart; the running ones stay",
		"state_dir", running.Daemon.StateDir, "control_socket", running.Daemon.ControlSocket, "status_listen", running.Daemon.StatusListen,
		"status_max_requests", running.Daemon.StatusMaxRequests, "nft_table", running.Actions.NftTable)
}

// Override tells an operator override that changed the intent (req as
// asked by by, res as intent.Apply answered it) in the event log. It
// writes no log line: the control server logs every override request,
// applied or refused, in one line ("override request", with the peer,
// the scope in control.Scope's wording and the result), and a second line
// here would tell the same override twice.
func (j *Journal) Override(req control.OverrideRequest, by string, res intent.Result) {
	j.event(control.Event{Kind: control.EventOverride, Subject: req.Resolver, Message: said(res, req.Reason, by)})
}

// said is an intent change's message with the operator's reason and who
// asked: "MESSAGE (reason: REASON) by BY".
func said(res intent.Result, reason, by string) string {
	text := res.Message
	if reason != "" {
		text += " (reason: " + reason + ")"
	}
	if by != "" {
		text += " by " + by
	}
	return text
}

// Orphans tells every override of list that cfg no longer matches (it is
// kept, and applies again if the name comes back).
func (j *Journal) Orphans(cfg *configs.Config, list []intent.Override) {
	for _, o := range list {
		if why := intent.Orphaned(cfg, o); why != "" {
			j.log.Warn("orphaned override kept (it applies again if the name comes back; lbctl enable clears it)",
				"resolver", o.Resolver, "action", o.Action, "scope", o.ScopeText(), "why", why, "reason", o.Reason)
			j.event(control.Event{Kind: control.EventOverride, Subject: o.Resolver, Error: true,
				Message: fmt.Sprintf("orphaned override kept: %s %s %s: %s", o.Action, o.Resolver, o.ScopeText(), why)})
		}
	}
}

// IntentChanged tells that the operator intent was changed elsewhere
// (another host sharing the store) and st is now in force.
func (j *Journal) IntentChanged(st intent.State) {
	j.log.Info("operator intent changed elsewhere; applying it", "overrides", len(st.Overrides))
	j.event(control.Event{Kind: control.EventOverride, Subject: "intent",
		Message: fmt.Sprintf("operator intent changed elsewhere: %d overrides in force", len(st.Overrides))})
}

// StateDiscarded tells that the state file could not be parsed (cause)
// and was moved aside to kept, so the daemon starts without its
// overrides (intent.FileOptions.OnDiscard).
func (j *Journal) StateDiscarded(kept string, cause error) {
	j.log.Error("state file could not be parsed and was moved aside (-discard-bad-state); starting WITHOUT its overrides",
		"copy", kept, "err", cause)
	j.event(control.Event{Kind: control.EventDaemon, Subject: "state", Error: true,
		Message: "overrides file could not be parsed; moved aside to " + kept + "; started without overrides"})
}

// IPVSMode is how the daemon drives IPVS.
type IPVSMode int

// The IPVS modes: the kernel's table; a dry run (computed, not
// applied); none (a host without a VIP opens no IPVS client).
const (
	IPVSKernel IPVSMode = iota
	IPVSDryRun
	IPVSNone
)

// String says the mode as the start line does.
func (m IPVSMode) String() string {
	switch m {
	case IPVSDryRun:
		return "dry-run (IPVS table computed, NOT applied)"
	case IPVSNone:
		return "none (no [[vip]]: no IPVS client opened)"
	}
	return "kernel"
}

// Started tells that the daemon started on the configuration at path,
// driving IPVS in mode.
func (j *Journal) Started(path string, cfg *configs.Config, mode IPVSMode) {
	j.dryRun = mode == IPVSDryRun
	j.noIPVS = mode == IPVSNone
	j.log.Info("lbdnsd started", "config", path, "ipvs", mode.String(), "summary", cfg.Summary(),
		"warm_up", resolvers.WarmUp(cfg).String())
	j.event(control.Event{Kind: control.EventDaemon, Subject: "lbdnsd", Message: "started (ipvs " + mode.String() + "): " + cfg.Summary(),
		Routine: control.RoutineStart})
}

// Stopping tells that the daemon is stopping (in the event log, the last
// thing lbctl events can show).
func (j *Journal) Stopping() {
	j.event(control.Event{Kind: control.EventDaemon, Subject: "lbdnsd", Message: "stopping; " + j.tableFate()})
}

// Stopped tells that the daemon has stopped.
func (j *Journal) Stopped() { j.log.Info("lbdnsd stopped; " + j.tableFate()) }

// tableFate says what becomes of the IPVS table when the daemon stops: it
// stays as applied, or, in a dry run, there is none (nothing was applied).
func (j *Journal) tableFate() string {
	switch {
	case j.dryRun:
		return "dry run: no IPVS table was applied, nothing left behind"
	case j.noIPVS:
		return "no IPVS table (no [[vip]])"
	}
	return "IPVS table left in place"
}

// Serving tells every verdict of after whose serving changed from
// before (a first verdict counts as a change only when it is "not
// serving"): what a route announcer would do, worded for people. what is
// "VIP" or "GSLB listener".
func (j *Journal) Serving(what string, before, after []hub.Verdict) {
	was := make(map[string]bool, len(before))
	for _, v := range before {
		was[v.Name] = v.Serving
	}
	for _, v := range after {
		prev, known := was[v.Name]
		if known && prev == v.Serving || !known && v.Serving {
			continue
		}
		if v.Serving {
			j.log.Info(what+" serving", "name", v.Name, "addr", v.Addr.String(), "reason", v.Reason)
			j.event(control.Event{Kind: control.EventServing, Subject: v.Name, Message: what + " serving again: " + v.Reason})
			continue
		}
		j.log.Warn(what+" not serving", "name", v.Name, "addr", v.Addr.String(), "reason", v.Reason)
		j.event(control.Event{Kind: control.EventServing, Subject: v.Name, Message: what + " " + v.Reason, Error: true})
	}
}

// lastResortEach is how many names of one kind of change the journal
// words one by one; beyond it, one line says how many and names the
// first ones (lbctl gslb status lists them all).
const lastResortEach = 10

// LastResorts tells the names and types of after that started answering
// by their last resort since before, and those of before that stopped
// (a change of last resort, or the end of the warm-up, is a stop and a
// start): an error for fail-open and servfail, a warning for the static
// set and while members are warming. Up to lastResortEach names of one
// kind are told one by one, more in one line: the first probe round of
// 20,000 names must not flood the event log.
func (j *Journal) LastResorts(before, after []gslb.NameStatus) {
	// Names are keyed by name and type, and worded only for the lines
	// told (20,000 names warming are 40,000 entries: no string each).
	type nameType struct {
		name string
		typ  uint16
	}
	key := func(n gslb.NameStatus) nameType { return nameType{n.Name, n.Type} }
	text := func(n gslb.NameStatus) string { return n.Name + " " + dns.TypeToString[n.Type] }
	was := make(map[nameType]gslb.NameStatus, len(before))
	for _, n := range before {
		was[key(n)] = n
	}
	// A group is one kind of change (its kind and last resort): what it
	// says of one name (one) and of several (many), worded once, how
	// many names (count), and the first lastResortEach of them.
	type groupID struct{ kind, lr string }
	type group struct {
		level     slog.Level
		one, many string
		count     int
		names     []string
	}
	groups := map[groupID]*group{}
	var order []groupID
	add := func(id groupID, n gslb.NameStatus) {
		g := groups[id]
		if g == nil {
			lr := id.lr
			switch id.kind {
			case "warm":
				g = &group{level: slog.LevelWarn,
					one:  "answers by its last resort (" + lr + ") while its members are warming (no verdict yet)",
					many: "answer by their last resort (" + lr + ") while their members are warming (no verdict yet)"}
			case "on":
				level := slog.LevelError
				if lr == gslb.TraceStatic {
					level = slog.LevelWarn
				}
				g = &group{level: level,
					one:  "answers by its last resort (" + lr + "): no pool of its policies has a member up",
					many: "answer by their last resort (" + lr + "): no pool of their policies has a member up"}
			default:
				g = &group{level: slog.LevelInfo,
					one:  "no longer answers by its last resort (" + lr + ")",
					many: "no longer answer by their last resort (" + lr + ")"}
			}
			groups[id] = g
			order = append(order, id)
		}
		if g.count++; len(g.names) < lastResortEach {
			g.names = append(g.names, text(n))
		}
	}
	started := func(n gslb.NameStatus) {
		if n.Warming {
			add(groupID{"warm", n.LastResort}, n)
		} else {
			add(groupID{"on", n.LastResort}, n)
		}
	}
	stopped := func(n gslb.NameStatus) { add(groupID{"off", n.LastResort}, n) }
	is := make(map[nameType]bool, len(after))
	for _, n := range after {
		is[key(n)] = true
		old, ok := was[key(n)]
		if ok && old == n {
			continue
		}
		if ok {
			stopped(old)
		}
		started(n)
	}
	for _, n := range before {
		if !is[key(n)] {
			stopped(n)
		}
	}
	for _, id := range order {
		g := groups[id]
		loud := g.level == slog.LevelError
		if g.count <= lastResortEach {
			for _, name := range g.names {
				j.log.Log(context.Background(), g.level, "gslb name "+g.one, "name", name)
				j.event(control.Event{Kind: control.EventLastResort, Subject: strings.Replace(name, " ", "/", 1), Message: name + " " + g.one, Error: loud})
			}
			continue
		}
		first := strings.Join(g.names, ", ")
		j.log.Log(context.Background(), g.level, "gslb names "+g.many, "names", g.count, "first", first)
		j.event(control.Event{Kind: control.EventLastResort, Subject: fmt.Sprintf("%d names", g.count), Error: loud,
			Message: fmt.Sprintf("%d names %s, among them %s (lbctl gslb status lists them all)", g.count, g.many, first)})
	}
}

// Client tells a client request that changed the intent (req as asked
// by by, res as intent.ApplyClient answered it) in the event log and a
// warning line: packets of a client are now dropped or limited, or no
// longer.
func (j *Journal) Client(req control.ClientRequest, by string, res intent.Result) {
	text := said(res, req.Reason, by)
	j.log.Warn(text, "action", req.Action, "client", req.Client)
	j.event(control.Event{Kind: control.EventClient, Subject: req.Client, Message: text})
}

// AutoLimitRefused tells that the automatic limit of client a flood
// alarm asked for was not set, and why.
func (j *Journal) AutoLimitRefused(alarm, client string, err error) {
	text := "flood alarm " + alarm + ": no automatic limit of " + client + ": " + err.Error()
	j.log.Warn(text, "alarm", alarm, "client", client)
	j.event(control.Event{Kind: control.EventClient, Subject: client, Message: text, Error: true})
}

// ClientsExpired tells the client actions that ended on their own at
// their expiry and were removed from the intent.
func (j *Journal) ClientsExpired(gone []intent.ClientAction) {
	for _, c := range gone {
		text := c.Action + " of " + intent.ClientText(c.Client) + " ended at its expiry (set by " + c.By + ": " + c.Reason + ")"
		j.log.Info(text, "client", intent.ClientText(c.Client), "action", c.Action)
		j.event(control.Event{Kind: control.EventClient, Subject: intent.ClientText(c.Client), Message: text})
	}
}

// ClientsEnforce tells that the client actions' enforcement failed (err
// not nil) or works again (err nil after a failure): told on a change
// only, not on every retry.
func (j *Journal) ClientsEnforce(table string, err error) {
	if err != nil {
		j.log.Error("client actions are kept in the intent but NOT enforced", "table", table, "err", err)
		j.event(control.Event{Kind: control.EventClient, Subject: "nftables", Error: true,
			Message: "client actions not enforced (table inet " + table + "): " + err.Error()})
		return
	}
	j.log.Info("client actions enforced again", "table", table)
	j.event(control.Event{Kind: control.EventClient, Subject: "nftables", Message: "client actions enforced again (table inet " + table + ")"})
}
