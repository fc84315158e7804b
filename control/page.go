package control

import (
	_ "embed"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pageHTML is the status page's template.
//
//go:embed page.html
var pageHTML string

// newPageTemplate parses the status page's template. It is part of the
// binary, so a parse failure is a programming error.
func newPageTemplate() *template.Template {
	return template.Must(template.New("page").Parse(pageHTML))
}

// pageData is what the status page shows, computed from a Status at one
// instant so that the template only lays it out.
type pageData struct {
	Host      string
	Refresh   int
	Generated timeCell
	Version   int
	// Error, when set, makes the page an error page.
	Error string
	// Summary is the status's incidents, worst first (Status.Summary);
	// Healthy the one line shown when there are none.
	Summary []incidentView
	Healthy string

	Daemon    daemonView
	VIPs      []vipView
	Pools     []poolView
	Overrides []overrideView
	Prefetch  []prefetchView
	GSLB      []gslbPoolView
	// FactColumns are the fact columns of the GSLB monitors' table.
	FactColumns []FactColumn
	// GSLBIntent are the GSLB emergency switches and TTL raises in force.
	GSLBIntent []gslbIntentView
	// GSLBResponder is the GSLB responder; nil when none runs.
	GSLBResponder *gslbResponderView
	// Events are the newest rows of the daemon's event log as the page's
	// filter keeps them, oldest first (the newest at the bottom, as lbctl
	// events prints them); EventsShown says whether the page has an event
	// log at all.
	Events      []eventView
	EventsShown bool
	// EventsFilter is the page's filter of the events (?kind=, ?all=1):
	// what it keeps, in words, the links to the other filters and the
	// kinds asked for that are no event kinds.
	EventsFilter eventFilterView
	// DaemonVersion is the daemon's build ("(devel) rev 0123456789ab").
	DaemonVersion string
	// BGP is the route announcer (bgp.go); nil without [bgp].
	BGP *bgpView
	// EtcdLost is the fleet's etcd out of reach (page_fleet.go); nil
	// while it is reachable or without [fleet].
	EtcdLost *etcdLostView
	// Flood is the flood alarms (flood.go); nil when queries are not
	// counted.
	Flood *floodView
	// Clients are the client actions (clients.go); nil when the daemon
	// reports none.
	Clients *clientsView
}

// incidentView is one incident of the summary.
type incidentView struct {
	Severity, What, Summary, Effect, Action, Runbook string
	Since                                            timeCell
}

// eventView is one row of the events table: one event, or (Group set)
// a run of consecutive routine events folded into one.
type eventView struct {
	Seq                    uint64
	Time                   timeCell
	Kind, Subject, Message string
	Error                  bool
	// Verdict is the CSS class of a verdict's row by how it stands now
	// (verdict-up, verdict-warn, verdict-down); empty for other events.
	Verdict string
	Group   *eventGroupView
}

// eventGroupView is a run of routine events folded into one row: what
// they are, the clock times of the first and the last, and the newest
// pageGroupEvents of them (Earlier: how many more the row does not list).
type eventGroupView struct {
	Text, From, To string
	Events         []eventView
	Earlier        int
}

// pageGroupEvents is how many events of a folded run the page lists
// when the row is expanded.
const pageGroupEvents = 50

// eventFilterView is the page's event filter: Text says what is shown,
// Links lead to the other filters, Unknown names the kinds asked for
// that are not event kinds (ignored).
type eventFilterView struct {
	// Kinds is true when the filter keeps some kinds only.
	Kinds   bool
	Text    string
	Links   []eventLink
	Unknown string
}

// eventLink is a link to the page with another event filter; On marks
// the filter in force.
type eventLink struct {
	Text, Href string
	On         bool
}

// gslbResponderView is the GSLB responder: where it listens, what it
// serves, and the names answering by their last resort.
type gslbResponderView struct {
	On                          bool
	Listen, Zones               string
	Serial                      uint32
	ListenError, LastBuildError string
	LastBuild                   timeCell
	LastResort                  []lastResortView
	// LastResortNames names the first names on their last resort for
	// the banner ("www.g.test. A, api.g.test. AAAA and 3 more").
	LastResortNames string
	// Listeners are the listen addresses' serving verdicts.
	Listeners []GSLBListener
	// Fronts are the encrypted fronts serving (DoH, DoT).
	Fronts []gslbFrontView
	// DryRun is the daemon's dry run (no VIP serves then, which is no
	// failure).
	DryRun bool
}

// gslbFrontView is one encrypted front of the responder: its
// transport, addresses, paths, connections and certificate.
type gslbFrontView struct {
	// Transport is "doh" or "dot"; Name how the page says it.
	Transport, Name string
	Listen, Paths   string
	Connections     int
	MaxConnections  int
	CertSubject     string
	// CertExpiry is when the certificate expires; Expired and
	// ExpiresSoon (within certSoon) are shown in red.
	CertExpiry           timeCell
	Expired, ExpiresSoon bool
}

// certSoon is how close an expiry the page shows in red.
const certSoon = 14 * 24 * time.Hour

// frontView is the page's view of f at now.
func frontView(f GSLBFront, now time.Time) gslbFrontView {
	v := gslbFrontView{Transport: f.Transport, Name: f.Transport, Listen: strings.Join(f.Listen, ", "),
		Connections: f.Connections, MaxConnections: f.MaxConnections, CertSubject: f.CertSubject, CertExpiry: cell(f.CertNotAfter, now)}
	switch f.Transport {
	case "doh":
		v.Name = "DNS over HTTPS"
		v.Paths = f.DoHPath
		if f.JSONPath != "" {
			v.Name += " and the JSON API"
			v.Paths += ", JSON " + f.JSONPath
		}
	case "dot":
		v.Name = "DNS over TLS"
	}
	if !f.CertNotAfter.IsZero() {
		v.Expired = !f.CertNotAfter.After(now)
		v.ExpiresSoon = !v.Expired && f.CertNotAfter.Sub(now) < certSoon
	}
	return v
}

// lastResortView is one name and type answering by its last resort.
type lastResortView struct {
	Name, Type, LastResort string
	Warming                bool
	Since                  timeCell
}

// gslbIntentView is one GSLB emergency switch or TTL raise, with its
// audit.
type gslbIntentView struct {
	Off               bool
	Kind, Scope, TTL  string
	Names, Reason, By string
	Set               timeCell
	Orphaned          bool
}

// timeCell is an instant shown as a relative time with the absolute time
// in a tooltip.
type timeCell struct {
	// Zero is true when there is no time ("never").
	Zero bool
	// Rel is the distance to now ("3m12s"), Abs the time itself.
	Rel string
	Abs string
	// Future is true when the time is after now.
	Future bool
}

type daemonView struct {
	Config      string
	Started     timeCell
	LastReload  timeCell
	ReloadError string
	DryRun      bool
	Warm        bool
	IPVSOps     uint64
	IPVSErrors  uint64
}

type vipView struct {
	Name, Address, Pool string
	Services            []serviceView
	// Serving is the VIP's serving verdict (nil: none yet);
	// ServingReason says why. ServingClass is its colour: ok when it
	// serves, crit when it does not, unknown without a verdict or in a
	// dry run (where nothing is applied, so no VIP serves by design).
	Serving       *bool
	ServingReason string
	ServingClass  string
	// ServingText is "yes", "no", or "-" without a verdict.
	ServingText string
}

type serviceView struct {
	Proto, Address, Scheduler string
	Dests                     int
}

type poolView struct {
	Name, Check, Diagnosis, Detail string
	// DiagClass is the diagnosis's severity: ok, warn, crit or unknown.
	DiagClass                       string
	VIPs                            []string
	Healthy, Enabled, Total, MinHlt int
	BelowMin                        bool
	// HealthyClass is the healthy count's colour: crit below the
	// minimum, warn when members are out for any reason, ok otherwise.
	HealthyClass string
	FailOpen     bool
	// Cause says why the pool fails open, for the banner: an upstream
	// failure, below its minimum, or recovering (fail-open held until
	// recover_healthy members are healthy).
	Cause string
	// FailOpenAll is true when the pool fails open with no last good set
	// (every enabled member kept); Held and Out name the failing members
	// it holds in traffic and those it keeps out, when failing open.
	FailOpenAll bool
	Held, Out   []string
	Vendors     []vendorView
	Members     []memberView
}

// vendorView is one vendor's count in a pool, with its colour: crit when
// a member of it fails, warn when one is out for another reason (drained,
// disabled, no verdict yet), ok when all are healthy.
type vendorView struct {
	Vendor         string
	Healthy, Total int
	Class          string
}

type memberView struct {
	Resolver, Address, Vendor  string
	Identity, IdentifiedVendor string
	// Mismatch is true when the identified vendor is not the declared one.
	Mismatch bool
	// State is the member's state as the Status says; StateClass the
	// CSS class for it (up, down, unknown or other).
	State, StateClass string
	Stale             bool
	Since             timeCell
	LastResult        string
	LastOK            bool
	LastProbe         timeCell
	RTT               string
	Flaps             int
	Override          string
	OverrideClass     string
	Reason            string
	InTraffic         bool
	// Drained is true when the member is in the table at weight 0 by an
	// operator's drain (shown as "drained", not as "yes").
	Drained bool
	Weight  uint32
	// Why is the reason code for being in or out of traffic, WhyText its
	// text, WhyClass the CSS class for it (in, held, drained, out or
	// other).
	Why, WhyText, WhyClass string
	Stats                  *statsView
}

type statsView struct {
	Active, Inactive, Conns string
	CPS, PPSIn, PPSOut      string
	BPSIn, BPSOut           string
}

type gslbPoolView struct {
	Name, Combine string
	Up, Total     int
	// AllUp is true when every member is up; UpClass is the count's
	// colour: ok when all are up, crit when none is, warn otherwise.
	AllUp   bool
	UpClass string
	Members []gslbMemberView
}

type gslbMemberView struct {
	Name, Address string
	// ProbeAddress is the probed address when it differs from Address.
	ProbeAddress      string
	Weight, Priority  int
	State, StateClass string
	Since             timeCell
	Reason            string
	// ReasonClass is the reason's colour: ok for a member up, bad for one
	// down, muted while it is unknown.
	ReasonClass string
	Monitors    []gslbMonitorView
}

type gslbMonitorView struct {
	Check, Kind       string
	State, StateClass string
	Since, LastProbe  timeCell
	LastResult        string
	LastOK            bool
	// RTT is formatted, "" when unknown.
	RTT string
	// Facts holds a cell per fact column (FactColumns).
	Facts []factCell
}

// factCell is one fact of a monitor in its column: Value formatted (""
// when the monitor has none), Num for a number column, Bad for a value
// shown as bad.
type factCell struct {
	Value    string
	Num, Bad bool
}

type overrideView struct {
	Resolver, Scope, Action, Reason, By string
	ActionClass                         string
	Set                                 timeCell
	Orphaned                            bool
}

type prefetchView struct {
	Name, Type, Resolver, Partition, Mode string
	State, StateClass                     string
	LastRefresh, NextRun                  timeCell
	TTL, Remaining, Failures, Expired     int
	// Gap is the last gap after expiry and the longest, "" when none.
	Gap       string
	LastError string
}

// buildPage computes the page's data from st at now.
func buildPage(st *Status, now time.Time, host string, refresh time.Duration) pageData {
	p := pageData{
		Host:          host,
		Refresh:       refreshSeconds(refresh),
		Generated:     cell(st.Generated, now),
		Version:       st.Version,
		DaemonVersion: st.Daemon.Version,
		Daemon: daemonView{
			Config:      st.Daemon.Config,
			Started:     cell(st.Daemon.Started, now),
			LastReload:  cell(st.Daemon.LastReload, now),
			ReloadError: st.Daemon.LastReloadError,
			DryRun:      st.Daemon.DryRun,
			Warm:        st.Daemon.Warm,
			IPVSOps:     st.Daemon.IPVSOps,
			IPVSErrors:  st.Daemon.IPVSErrors,
		},
	}
	for _, in := range st.Summary {
		p.Summary = append(p.Summary, incidentView{Severity: oneOf(in.Severity, "critical", "major", "minor", "info"),
			What: in.What, Summary: in.Summary, Effect: in.Effect, Action: in.Action, Runbook: in.Runbook, Since: cell(in.Since, now)})
	}
	if len(p.Summary) == 0 {
		p.Healthy = st.HealthyLine()
	}
	if st.Generated.IsZero() {
		p.Generated = cell(now, now)
	}
	for _, v := range st.VIPs {
		vv := vipView{Name: v.Name, Address: v.Address, Pool: v.Pool, Serving: v.Serving, ServingReason: v.ServingReason,
			ServingClass: "unknown", ServingText: "-"}
		if v.Serving != nil {
			vv.ServingText = "no"
			if *v.Serving {
				vv.ServingText = "yes"
			}
			if !st.Daemon.DryRun {
				vv.ServingClass = "crit"
				if *v.Serving {
					vv.ServingClass = "ok"
				}
			}
		}
		for _, s := range v.Services {
			vv.Services = append(vv.Services, serviceView{Proto: s.Proto, Address: s.Address, Scheduler: s.Scheduler, Dests: len(s.Destinations)})
		}
		p.VIPs = append(p.VIPs, vv)
	}
	for _, pl := range st.Pools {
		p.Pools = append(p.Pools, buildPool(pl, now))
	}
	for _, o := range st.Overrides {
		p.Overrides = append(p.Overrides, overrideView{
			Resolver: o.Resolver, Scope: Scope(o.Pool, o.VIP),
			Action: o.Action, ActionClass: oneOf(o.Action, "drain", "disable"),
			Reason: o.Reason, By: o.By, Set: cell(o.Set, now), Orphaned: o.Orphaned,
		})
	}
	p.Clients = buildClients(st.Clients, now)
	for _, e := range st.Prefetch {
		p.Prefetch = append(p.Prefetch, prefetchView{
			Name: e.Name, Type: e.Type, Resolver: e.Resolver, Partition: e.Partition, Mode: e.Mode,
			State: e.State, StateClass: oneOf(e.State, "ok", "expired", "failing", "parked", "pending"), Expired: e.Expired, Gap: gapText(e),
			LastRefresh: cell(e.LastRefresh, now), NextRun: cell(e.NextRun, now),
			TTL: e.TTLSeconds, Remaining: e.RemainingSeconds, Failures: e.Failures, LastError: e.LastError,
		})
	}
	for _, g := range st.GSLB {
		p.GSLB = append(p.GSLB, buildGSLBPool(g, now))
	}
	p.FactColumns = FactColumns()
	for _, g := range st.GSLBIntent {
		v := gslbIntentView{Off: g.Kind == GSLBOff, Kind: g.Kind, Scope: g.Scope, Names: strings.Join(g.Names, ", "), Reason: g.Reason, By: g.By,
			Set: cell(g.Set, now), Orphaned: g.Orphaned}
		if g.Seconds > 0 {
			v.TTL = strconv.Itoa(g.Seconds) + "s"
		}
		p.GSLBIntent = append(p.GSLBIntent, v)
	}
	if r := st.GSLBResponder; r != nil {
		v := &gslbResponderView{On: r.On, Listen: strings.Join(r.Listen, ", "), Zones: strings.Join(r.Zones, ", "), Serial: r.Serial,
			ListenError: r.ListenError, LastBuildError: r.LastBuildError, LastBuild: cell(r.LastBuild, now), DryRun: st.Daemon.DryRun}
		var names []string
		for _, lr := range r.LastResort {
			v.LastResort = append(v.LastResort, lastResortView{Name: lr.Name, Type: lr.Type, LastResort: lr.LastResort, Warming: lr.Warming, Since: cell(lr.Since, now)})
			names = append(names, lr.Name+" "+lr.Type)
		}
		v.LastResortNames = bannerList(names, 5)
		v.Listeners = r.Listeners
		for _, f := range r.Fronts {
			v.Fronts = append(v.Fronts, frontView(f, now))
		}
		p.GSLBResponder = v
	}
	p.BGP = buildBGP(st.BGP, now)             // bgp.go
	p.Flood = buildFlood(st.Flood, now)       // flood.go
	p.EtcdLost = buildEtcdLost(st.Fleet, now) // page_fleet.go
	return p
}

// buildGSLBPool computes the view of a GSLB pool at now.
func buildGSLBPool(g GSLBPool, now time.Time) gslbPoolView {
	v := gslbPoolView{Name: g.Name, Combine: g.Combine, Up: g.Up, Total: g.Total, AllUp: g.Up == g.Total, UpClass: "warn"}
	switch {
	case g.Up == g.Total:
		v.UpClass = "ok"
	case g.Up == 0:
		v.UpClass = "crit"
	}
	if g.Combine == "at_least" {
		v.Combine = "at least " + strconv.Itoa(g.AtLeast)
	}
	for _, m := range g.Members {
		mv := gslbMemberView{
			Name: m.Name, Address: m.Address, Weight: m.Weight, Priority: m.Priority,
			State: m.State, StateClass: oneOf(m.State, "up", "down", "unknown"),
			Since: cell(m.Since, now), Reason: m.Reason,
		}
		switch mv.StateClass {
		case "up":
			mv.ReasonClass = "ok"
		case "down":
			mv.ReasonClass = "bad"
		default:
			mv.ReasonClass = "muted"
		}
		if m.ProbeAddress != m.Address {
			mv.ProbeAddress = m.ProbeAddress
		}
		for _, mo := range m.Monitors {
			ov := gslbMonitorView{
				Check: mo.Check, Kind: mo.Kind, State: mo.State, StateClass: oneOf(mo.State, "up", "down", "unknown"),
				Since: cell(mo.Since, now), LastProbe: cell(mo.LastProbe, now),
				LastResult: mo.LastResult, LastOK: mo.LastOK,
			}
			if !mo.LastProbe.IsZero() {
				ov.RTT = strconv.FormatFloat(mo.RTTMillis, 'f', 1, 64)
			}
			for _, c := range FactColumns() {
				cell := factCell{Num: !c.Text}
				if f, ok := mo.Fact(c.Fact); ok {
					cell.Value, cell.Bad = f.Format(), c.BadBelowZero && f.Value < 0
				}
				ov.Facts = append(ov.Facts, cell)
			}
			mv.Monitors = append(mv.Monitors, ov)
		}
		v.Members = append(v.Members, mv)
	}
	return v
}

// errorPage is the page shown when the Backend could not give a Status.
func errorPage(now time.Time, host string, refresh time.Duration, err error) pageData {
	return pageData{
		Host: host, Refresh: refreshSeconds(refresh), Generated: cell(now, now),
		Version: StatusVersion, Error: err.Error(),
	}
}

func buildPool(pl Pool, now time.Time) poolView {
	v := poolView{
		Name: pl.Name, Check: pl.Check, Diagnosis: pl.Diagnosis, Detail: pl.Detail,
		DiagClass: diagnosisClass(pl.Diagnosis), VIPs: pl.VIPs,
		Healthy: pl.Healthy, Enabled: pl.Enabled, Total: pl.Total, MinHlt: pl.MinHealthy,
		BelowMin: pl.Healthy < pl.MinHealthy, FailOpen: pl.FailOpen, HealthyClass: "ok",
	}
	if pl.Healthy < pl.Total {
		v.HealthyClass = "warn"
	}
	if v.BelowMin {
		v.HealthyClass = "crit"
	}
	for _, vc := range pl.Vendors {
		vv := vendorView{Vendor: vc.Vendor, Healthy: vc.Healthy, Total: vc.Total, Class: "ok"}
		for _, m := range pl.Members {
			if m.Vendor != vc.Vendor || m.Why == WhyHealthy {
				continue
			}
			if failing(m) {
				vv.Class = "crit"
				break
			}
			vv.Class = "warn"
		}
		v.Vendors = append(v.Vendors, vv)
	}
	for _, m := range pl.Members {
		mv := memberView{
			Resolver: m.Resolver, Address: m.Address, Vendor: m.Vendor,
			Identity: m.Identity, IdentifiedVendor: m.IdentifiedVendor,
			Mismatch: m.Vendor != "" && m.IdentifiedVendor != "" && m.Vendor != m.IdentifiedVendor,
			State:    m.State, StateClass: oneOf(m.State, "up", "down", "unknown"),
			Stale: !m.Fresh, Since: cell(m.Since, now),
			LastResult: m.LastResult, LastOK: m.LastResult == "ok", LastProbe: cell(m.LastProbe, now),
			RTT:      strconv.FormatFloat(m.RTTMillis, 'f', 1, 64),
			Flaps:    m.Flaps,
			Override: m.Override, OverrideClass: oneOf(m.Override, "none", "drain", "disable"),
			Reason:    m.OverrideReason,
			InTraffic: m.InTraffic, Weight: m.Weight, Drained: m.InTraffic && m.Why == WhyDrained,
			Why: m.Why, WhyText: m.WhyText, WhyClass: whyClass(m.Why),
		}
		if pl.FailOpen {
			switch m.Why {
			case WhyHeldFailOpen:
				v.Held = append(v.Held, m.Resolver)
			case WhyOutFailOpen:
				v.Out = append(v.Out, m.Resolver)
			case WhyFailOpenAll:
				v.FailOpenAll = true
			}
		}
		if mv.Override == "" {
			mv.Override, mv.OverrideClass = "none", "none"
		}
		if m.LastProbe.IsZero() {
			mv.RTT = ""
		}
		if s := m.Stats; s != nil {
			mv.Stats = &statsView{
				Active: si(uint64(s.ActiveConns)), Inactive: si(uint64(s.InactiveConns)), Conns: si(s.Conns),
				CPS: si(s.CPS), PPSIn: si(s.PPSIn), PPSOut: si(s.PPSOut), BPSIn: si(s.BPSIn), BPSOut: si(s.BPSOut),
			}
		}
		v.Members = append(v.Members, mv)
	}
	if v.FailOpen {
		v.Cause = failOpenCause(pl)
	}
	return v
}

// failOpenCause says why pl fails open, in the words of the FAIL-OPEN
// banner (after "FAIL-OPEN: pool NAME "): every member failing at once
// (the upstream), fewer healthy members than the minimum, or a recovery
// that has not yet reached recover_healthy (which resolvers' policy writes
// in the detail: "recovering: fail-open held until N members are
// healthy").
func failOpenCause(pl Pool) string {
	switch {
	case pl.Diagnosis == "upstream-failure":
		return "fails open: every member fails its check at once, which points at their upstream, not at the resolvers"
	case pl.Healthy < pl.MinHealthy:
		return fmt.Sprintf("is below its minimum of %d healthy", pl.MinHealthy)
	}
	if _, after, ok := strings.Cut(pl.Detail, "recovering: fail-open held until "); ok {
		if n, _, ok := strings.Cut(after, " "); ok {
			return fmt.Sprintf("is recovering (%d healthy, minimum %d) and stays failed open until %s members are healthy (recover_healthy)",
				pl.Healthy, pl.MinHealthy, n)
		}
	}
	return "fails open"
}

// failing reports whether m fails its check (down, or facts too old to
// trust), whatever an operator said of it: what the page shows red.
func failing(m Member) bool {
	return m.State == "down" || (m.State == "up" && !m.Fresh)
}

// whyClass is the CSS class of a member's reason for being in or out of
// traffic: in (green), held (amber: failing, kept by fail-open), drained
// and disabled (an operator's, not a failure), out (red: failing) and
// unknown (no verdict yet).
func whyClass(why string) string {
	switch why {
	case WhyHealthy:
		return "in"
	case WhyHeldFailOpen, WhyFailOpenAll:
		return "held"
	case WhyDrained:
		return "drained"
	case WhyDisabled:
		return "disabled"
	case WhyNoVerdict:
		return "unknown"
	case WhyDown, WhyStale, WhyOutFailOpen:
		return "out"
	}
	return "other"
}

// eventViews are the newest n rows of evs (oldest first) as f keeps
// them, oldest first.
func eventViews(evs []Event, f EventFilter, n int, now time.Time) []eventView {
	rows := f.Rows(evs)
	if len(rows) > n {
		rows = rows[len(rows)-n:]
	}
	out := make([]eventView, 0, len(rows))
	for _, r := range rows {
		if len(r.Routine) == 0 {
			out = append(out, eventRow(r.Event, now))
			continue
		}
		first, last := r.Routine[0], r.Routine[len(r.Routine)-1]
		g := &eventGroupView{Text: RoutineText(r.Routine), From: clock(first.Time), To: clock(last.Time)}
		list := r.Routine
		if len(list) > pageGroupEvents {
			g.Earlier = len(list) - pageGroupEvents
			list = list[g.Earlier:]
		}
		for _, e := range list {
			g.Events = append(g.Events, eventRow(e, now))
		}
		out = append(out, eventView{Seq: last.Seq, Time: cell(first.Time, now), Kind: "routine", Group: g})
	}
	return out
}

// eventRow is the row of one event.
func eventRow(e Event, now time.Time) eventView {
	v := eventView{Seq: e.Seq, Time: cell(e.Time, now), Kind: e.Kind, Subject: e.Subject, Message: e.Message, Error: e.Error}
	if e.Verdict != "" {
		v.Verdict = "verdict-" + oneOf(e.Verdict, VerdictUp, VerdictWarn, VerdictDown)
	}
	return v
}

// clock is t's time of day as the page's folded rows say it.
func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// pageEventFilter reads the page's event filter from its query (kind=K,K
// and all=1): the filter, with the kinds that are no event kinds left
// out, and its view.
func pageEventFilter(q url.Values, present []Event) (EventFilter, eventFilterView) {
	var f EventFilter
	var v eventFilterView
	f.All = q.Get("all") == "1" || q.Get("all") == "true"
	for _, k := range SplitKinds(strings.Join(q["kind"], ",")) {
		if slices.Contains(EventKinds(), k) {
			f.Kinds = append(f.Kinds, k)
		} else {
			v.Unknown = joinNonEmpty(v.Unknown, strconv.Quote(k))
		}
	}
	href := func(kinds []string, all bool) string {
		p := url.Values{}
		if len(kinds) > 0 {
			p.Set("kind", strings.Join(kinds, ","))
		}
		if all {
			p.Set("all", "1")
		}
		return "?" + p.Encode() + "#events"
	}
	v.Text = "events for people (verdicts, operator actions, failures), routine work folded into one row"
	if f.All {
		v.Text = "every event, routine work included"
	}
	if len(f.Kinds) > 0 || v.Unknown != "" {
		v.Kinds = true
	}
	if len(f.Kinds) > 0 {
		v.Text += "; kinds " + strings.Join(f.Kinds, ", ")
	}
	v.Links = append(v.Links,
		eventLink{Text: "for people", Href: href(f.Kinds, false), On: !f.All},
		eventLink{Text: "everything", Href: href(f.Kinds, true), On: f.All},
		eventLink{Text: "every kind", Href: href(nil, f.All), On: len(f.Kinds) == 0})
	seen := map[string]bool{}
	for _, e := range present {
		seen[e.Kind] = true
	}
	for _, k := range EventKinds() {
		if seen[k] || slices.Contains(f.Kinds, k) {
			v.Links = append(v.Links, eventLink{Text: k, Href: href([]string{k}, f.All), On: slices.Equal(f.Kinds, []string{k})})
		}
	}
	return f, v
}

// joinNonEmpty joins a and b with ", ", leaving out an empty a.
func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// diagnosisClass is the severity of a pool diagnosis.
func diagnosisClass(d string) string {
	switch d {
	case "healthy":
		return "ok"
	case "degraded":
		return "warn"
	case "vendor-wide-failure", "below-minimum", "upstream-failure":
		return "crit"
	case "no-facts", "":
		return "unknown"
	}
	return "warn"
}

// oneOf returns v when it is one of known, "other" otherwise, so that a
// value from the Status never makes up a CSS class.
// gapText is a prefetch entry's last gap after expiry and its longest
// ("133.5 (max 210.0)" milliseconds), "" when it has none.
func gapText(e PrefetchEntry) string {
	if e.MaxGapMillis <= 0 {
		return ""
	}
	return strconv.FormatFloat(e.GapMillis, 'f', 1, 64) + " (max " + strconv.FormatFloat(e.MaxGapMillis, 'f', 1, 64) + ")"
}

func oneOf(v string, known ...string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return "other"
}

func refreshSeconds(d time.Duration) int {
	return max(1, int((d+time.Second/2)/time.Second))
}

// cell makes a timeCell of t seen at now.
func cell(t, now time.Time) timeCell {
	if t.IsZero() {
		return timeCell{Zero: true, Rel: "never", Abs: ""}
	}
	d := now.Sub(t)
	c := timeCell{Abs: t.Local().Format("2006-01-02 15:04:05 MST")}
	if d < 0 {
		c.Future = true
		d = -d
	}
	c.Rel = compact(d)
	return c
}

// compact formats d in its two largest units: "45s", "3m12s", "1h2m",
// "2d3h".
func compact(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	units := []struct {
		n    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}}
	var b strings.Builder
	shown := 0
	for _, u := range units {
		if shown == 2 {
			break
		}
		q := s / u.n
		if q == 0 && shown == 0 && u.n > 1 {
			continue
		}
		if q > 0 || shown == 0 {
			fmt.Fprintf(&b, "%d%s", q, u.name)
		}
		s -= q * u.n
		shown++
	}
	return b.String()
}

// si formats n with an SI prefix: 950, 1.2k, 3.4M, 5.6G.
func si(n uint64) string {
	const k = 1000
	switch {
	case n < k:
		return strconv.FormatUint(n, 10)
	case n < k*k:
		return strconv.FormatFloat(float64(n)/k, 'f', 1, 64) + "k"
	case n < k*k*k:
		return strconv.FormatFloat(float64(n)/(k*k), 'f', 1, 64) + "M"
	case n < k*k*k*k:
		return strconv.FormatFloat(float64(n)/(k*k*k), 'f', 1, 64) + "G"
	}
	return strconv.FormatFloat(float64(n)/(k*k*k*k), 'f', 1, 64) + "T"
}

// bannerList joins the first max of names with commas, and says how
// many more there are.
func bannerList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + " and " + strconv.Itoa(len(names)-max) + " more"
}
