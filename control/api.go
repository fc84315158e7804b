// Package control is lbdns's operator interface: the API types, the
// control-socket server (JSON over HTTP on a Unix socket, used by lbctl),
// its client, and the read-only status server (JSON status, Prometheus
// metrics and a status page over TCP).
//
// The package reports on the daemon without importing it or the packages
// it reports on: the daemon fills the types below and implements Backend.
package control

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// APIPrefix is the versioned path prefix of the control socket's API.
const APIPrefix = "/v1"

// StatusVersion is the version of the Status schema (the "version" field
// of GET /status and GET /v1/status). It changes only when a field is
// removed or changes meaning; new fields may be added within a version.
const StatusVersion = 1

// Status is the daemon's state as lbctl status, GET /v1/status on the
// control socket and GET /status on the status server show it.
type Status struct {
	// Version is StatusVersion.
	Version int `json:"version"`
	// Generated is when the snapshot was taken.
	Generated time.Time `json:"generated"`
	// Daemon describes the running daemon.
	Daemon Daemon `json:"daemon"`
	// Summary is what is not as configured, worst first, one incident
	// a thing (package incident); empty when everything is. The page
	// and lbctl status show it first.
	Summary []Incident `json:"summary"`
	// VIPs lists every configured VIP, in configuration order.
	VIPs []VIP `json:"vips"`
	// Pools lists every pool's verdict, in configuration order.
	Pools []Pool `json:"pools"`
	// Overrides lists every operator override in force, orphaned ones
	// included.
	Overrides []Override `json:"overrides"`
	// Prefetch lists the cache-refresh entries (name × type × resolver),
	// when the prefetcher runs.
	Prefetch []PrefetchEntry `json:"prefetch,omitempty"`
	// GSLB lists every GSLB pool with its members' health, in
	// configuration order; absent when no GSLB pool is configured.
	GSLB []GSLBPool `json:"gslb,omitempty"`
	// GSLBIntent lists every GSLB emergency switch and TTL raise in
	// force, orphaned ones included; absent when there is none. While it
	// is not empty the status page, lbctl status and lbctl gslb status
	// show a banner: the answers themselves look no different.
	GSLBIntent []GSLBIntent `json:"gslb_intent,omitempty"`
	// GSLBResponder is the GSLB responder: where it listens, what it
	// serves and which names answer by their last resort; absent when
	// the daemon runs none.
	GSLBResponder *GSLBResponder `json:"gslb_responder,omitempty"`
	// BGP is the route announcer (bgp.go); absent without [bgp].
	BGP *BGPStatus `json:"bgp,omitempty"`
	// Fleet is the node's link to the fleet's etcd; absent without
	// [fleet].
	Fleet *FleetEtcd `json:"fleet,omitempty"`
	// Flood is the flood alarms (flood.go); absent when queries are not
	// counted.
	Flood *FloodStatus `json:"flood,omitempty"`
	// Clients are the client actions (clients.go): blocks and limits in
	// force and whether the kernel enforces them.
	Clients *ClientsStatus `json:"clients,omitempty"`
	// Dnstap is the dnstap intake (dnstap.go); absent without [dnstap].
	Dnstap *DnstapStatus `json:"dnstap,omitempty"`
}

// Incident is one thing that is not as configured, for the person on
// call: what, how bad, since when and what to do first.
type Incident struct {
	// Severity is critical, major, minor or info (incident's constants).
	Severity string `json:"severity"`
	// What names the thing: "pool local", "GSLB pool east", "VIP dns1",
	// "fleet etcd", "flood", "dry run".
	What string `json:"what"`
	// Summary says what is wrong and how much is left, in one line.
	Summary string `json:"summary"`
	// Effect says what clients get meanwhile (empty when it is the
	// same as usual).
	Effect string `json:"effect,omitempty"`
	// Since is when it began (absent when unknown).
	Since time.Time `json:"since,omitzero"`
	// Action is the first thing to check or do.
	Action string `json:"action,omitempty"`
	// Runbook is the RUNBOOK.md section of the alert that covers it
	// ("RUNBOOK.md#lbdnspoolfailingopen"); empty for info.
	Runbook string `json:"runbook,omitempty"`
}

// HealthyLine is the one line the page and lbctl status show when the
// summary is empty: "All as configured: 2 resolver pools healthy, 1 VIP
// serving, 3 GSLB pools up."
func (st *Status) HealthyLine() string {
	var parts []string
	count := func(n int, thing, state string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+thing+" "+state)
		case n > 1:
			parts = append(parts, strconv.Itoa(n)+" "+thing+"s "+state)
		}
	}
	count(len(st.Pools), "resolver pool", "healthy")
	count(len(st.VIPs), "VIP", "serving")
	count(len(st.GSLB), "GSLB pool", "up")
	if len(parts) == 0 {
		return "All as configured."
	}
	return "All as configured: " + strings.Join(parts, ", ") + "."
}

// Daemon describes the running daemon.
type Daemon struct {
	// Config is the configuration file's path.
	Config string `json:"config"`
	// Started is when the daemon started.
	Started time.Time `json:"started"`
	// DryRun is true when the IPVS table is computed but NOT applied.
	DryRun bool `json:"dry_run"`
	// Warm is false until every target has a verdict (or the warm-up
	// time is over); until then the IPVS table is not touched.
	Warm bool `json:"warm"`
	// LastReload is when the configuration was last loaded successfully
	// (the start counts as a load).
	LastReload time.Time `json:"last_reload"`
	// LastReloadError is the error of the last reload attempt when it
	// failed, empty when it succeeded.
	LastReloadError string `json:"last_reload_error,omitempty"`
	// IPVSOps and IPVSErrors count IPVS operations applied and failed
	// since start.
	IPVSOps    uint64 `json:"ipvs_ops"`
	IPVSErrors uint64 `json:"ipvs_errors"`
	// Version is the daemon's build: its module version and the VCS
	// revision it was built from ("(devel) rev 0123456789ab"), as
	// lbdnsd -version prints it. Empty from a daemon that predates it.
	Version string `json:"version,omitempty"`
}

// VIP is one virtual IP with the IPVS services the daemon owns for it.
type VIP struct {
	// Name is the VIP's configured name.
	Name string `json:"name"`
	// Address is the VIP's IP address.
	Address string `json:"address"`
	// Pool is the pool serving the VIP.
	Pool string `json:"pool"`
	// Services are the VIP's IPVS services as applied; empty before the
	// first reconcile (warm-up).
	Services []Service `json:"services"`
	// Serving is the VIP's serving verdict: every one of its services
	// has a destination taking traffic in the table the kernel was given
	// (never in a dry run); null until the warm-up is over. A route
	// announcer follows it.
	Serving *bool `json:"serving"`
	// ServingReason says why, in one line.
	ServingReason string `json:"serving_reason"`
}

// Service is one IPVS virtual service as the daemon last applied it (in
// dry-run: would have applied it).
type Service struct {
	// Proto is "udp" or "tcp".
	Proto string `json:"proto"`
	// Address is "ADDR:PORT" (IPv6 in brackets).
	Address string `json:"address"`
	// Scheduler is the IPVS scheduler (rr, wrr, ...).
	Scheduler string `json:"scheduler"`
	// Destinations are the real servers, sorted by address.
	Destinations []Destination `json:"destinations"`
}

// Destination is one real server of a Service.
type Destination struct {
	// Resolver is the configured resolver this destination belongs to
	// ("" when the daemon cannot tell).
	Resolver string `json:"resolver"`
	// Address is "ADDR:PORT".
	Address string `json:"address"`
	// Forwarding is "dr", "nat" or "tunnel".
	Forwarding string `json:"forwarding"`
	// Weight is the IPVS weight (0: drained).
	Weight uint32 `json:"weight"`
	// Stats are the kernel's counters; nil when not read (dry-run, or
	// the kernel could not be asked).
	Stats *DestStats `json:"stats,omitempty"`
}

// DestStats are the kernel's IPVS counters and rate estimates of one
// destination.
type DestStats struct {
	// ActiveConns and InactiveConns are the connections now (UDP flows
	// count as inactive).
	ActiveConns   uint32 `json:"active_conns"`
	InactiveConns uint32 `json:"inactive_conns"`
	// Conns, PacketsIn/Out and BytesIn/Out count since the destination
	// was created.
	Conns      uint64 `json:"conns"`
	PacketsIn  uint64 `json:"packets_in"`
	PacketsOut uint64 `json:"packets_out"`
	BytesIn    uint64 `json:"bytes_in"`
	BytesOut   uint64 `json:"bytes_out"`
	// Rates are the kernel's estimates (per second, over a few seconds).
	CPS    uint64 `json:"cps"`
	PPSIn  uint64 `json:"pps_in"`
	PPSOut uint64 `json:"pps_out"`
	BPSIn  uint64 `json:"bps_in"`
	BPSOut uint64 `json:"bps_out"`
}

// Pool is the verdict on one resolver pool.
type Pool struct {
	// Name is the pool's configured name.
	Name string `json:"name"`
	// Check is the check profile the pool's members are probed with.
	Check string `json:"check"`
	// VIPs served by this pool.
	VIPs []string `json:"vips"`
	// MinHealthy is the configured min_healthy.
	MinHealthy int `json:"min_healthy"`
	// Total members, Enabled (not disabled by an operator), Healthy
	// (up, fresh and not overridden).
	Total   int `json:"total"`
	Enabled int `json:"enabled"`
	Healthy int `json:"healthy"`
	// FailOpen is true when the pool is below its minimum (or every
	// member fails at once) and keeps members in traffic that fail their
	// checks: its last good set (the members in traffic just before the
	// collapse; those already failing before stay out), or every enabled
	// member when it has none. Each member's Why says which.
	FailOpen bool `json:"fail_open"`
	// Diagnosis is one of healthy, degraded, vendor-wide-failure,
	// below-minimum, upstream-failure, no-facts.
	Diagnosis string `json:"diagnosis"`
	// Detail explains the diagnosis in one line.
	Detail string `json:"detail"`
	// Vendors counts members per vendor, sorted by vendor.
	Vendors []VendorCount `json:"vendors"`
	// Members are the pool's members in configuration order.
	Members []Member `json:"members"`
}

// GSLBPool is the health of one GSLB pool's members.
type GSLBPool struct {
	// Name is the pool's configured name.
	Name string `json:"name"`
	// Combine is how a member's monitors combine: "all" (every monitor
	// up) or "at_least" (at least AtLeast monitors up).
	Combine string `json:"combine"`
	// AtLeast is the number of monitors that must be up with combine
	// "at_least" (0 otherwise).
	AtLeast int `json:"at_least"`
	// Up counts the members that are up; Total all members.
	Up    int `json:"up"`
	Total int `json:"total"`
	// Members are the pool's members in configuration order.
	// Fallback is the GSLB pool tried when this one has none up
	// ([[gslb.pool]] fallback); empty when none.
	Fallback string       `json:"fallback,omitempty"`
	Members  []GSLBMember `json:"members"`
}

// GSLBMember is one member of a GSLB pool and its monitors.
type GSLBMember struct {
	// Name is the member's configured name.
	Name string `json:"name"`
	// Address is the address answered for the member; ProbeAddress the
	// address its monitors probe when it differs ("" otherwise).
	Address      string `json:"address"`
	ProbeAddress string `json:"probe_address"`
	// Weight and Priority are the configured weight and priority.
	Weight   int `json:"weight"`
	Priority int `json:"priority"`
	// State is "up", "down" or "unknown" (no verdict yet: never down
	// while the first probe round runs), combined from the monitors.
	State string `json:"state"`
	// Since is when State was entered (zero while unknown).
	Since time.Time `json:"since,omitzero"`
	// Reason says in one line how the monitors combine to State: how
	// many are up of how many are needed, naming those down or without a
	// verdict ("2 of 3 monitors up (all needed); down: web").
	Reason string `json:"reason"`
	// Monitors are the member's monitors, in configuration order. In a
	// fleet, a monitor's state is the fleet's verdict when it has one.
	Monitors []GSLBMonitor `json:"monitors"`
	// Fleet is the fleet's verdict on the member and the votes it was
	// made of (nil outside a fleet).
	Fleet *GSLBFleetVerdict `json:"fleet,omitempty"`
}

// GSLBFleetVerdict is the fleet's verdict on one GSLB member.
type GSLBFleetVerdict struct {
	// Source is where the answers take the member's state from: "fleet"
	// or "own probes" (FleetStatus.Verdicts).
	Source string `json:"source"`
	// Verdict is "up", "down" or "none" (a tie or too few votes, and no
	// verdict held: the node's own probes, else no verdict yet); Held
	// is set while the last verdict is held; Decided is when the votes
	// last decided.
	Verdict string    `json:"verdict"`
	Held    bool      `json:"held,omitempty"`
	Decided time.Time `json:"decided,omitzero"`
	// Quorum is how many votes a verdict needs (a majority of the
	// member's probers).
	Quorum int `json:"quorum"`
	// Probers are the member's assigned probers, in the order of choice.
	Probers []GSLBProber `json:"probers"`
	// Votes are the votes that counted, by prober.
	Votes []GSLBVote `json:"votes"`
}

// GSLBProber is one prober of a member.
type GSLBProber struct {
	Name     string `json:"name"`
	Location string `json:"location"`
}

// GSLBVote is one prober's vote on a member.
type GSLBVote struct {
	Prober   string `json:"prober"`
	Location string `json:"location"`
	// Up is the prober's own rise/fall state of the member; At is when
	// it changed.
	Up bool      `json:"up"`
	At time.Time `json:"at"`
}

// GSLBMonitor is one monitor (check profile) of a GSLB member.
type GSLBMonitor struct {
	// Check is the check profile's name, Kind its kind (icmp, tcp, udp,
	// http, https, dns).
	Check string `json:"check"`
	Kind  string `json:"kind"`
	// State is "up", "down" or "unknown"; Since when it was entered.
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// LastProbe is when the last probe finished; LastResult its one-line
	// result: a short summary on success ("status 200", "3/3 echoes, avg
	// 0.4ms (raw socket)"), the reason on failure; RTTMillis its
	// round-trip time.
	LastProbe  time.Time `json:"last_probe,omitzero"`
	LastResult string    `json:"last_result"`
	// LastOK is true when the last probe passed.
	LastOK    bool    `json:"last_ok,omitempty"`
	RTTMillis float64 `json:"rtt_ms"`
	// Facts are the facts of the monitor's kind that its last probe
	// found, in name order (an https monitor's cert_days_left, an icmp
	// monitor's loss_percent and socket): in JSON, each is a key of the
	// monitor's object (see MarshalJSON).
	Facts []Fact `json:"-"`
}

// VendorCount counts one vendor's members of a pool.
type VendorCount struct {
	// Vendor is the declared vendor (bind, unbound, ...).
	Vendor  string `json:"vendor"`
	Total   int    `json:"total"`
	Healthy int    `json:"healthy"`
}

// Member is one back-end resolver in one pool.
type Member struct {
	// Resolver is the resolver's configured name.
	Resolver string `json:"resolver"`
	// Address is the resolver's ADDR:PORT.
	Address string `json:"address"`
	// Vendor is the declared vendor; Identity is the version.bind answer
	// ("" when none); IdentifiedVendor is the vendor that answer names
	// ("" when unknown).
	Vendor           string `json:"vendor"`
	Identity         string `json:"identity,omitempty"`
	IdentifiedVendor string `json:"identified_vendor,omitempty"`
	// State is "up", "down" or "unknown".
	State string `json:"state"`
	// Since is when State was entered (zero while unknown).
	Since time.Time `json:"since,omitzero"`
	// Fresh is false when the last probe result is too old to trust.
	Fresh bool `json:"fresh"`
	// LastProbe is when the last probe finished; LastResult its one-line
	// result: a short summary on success ("status 200", "3/3 echoes, avg
	// 0.4ms (raw socket)"), the reason on failure; RTTMillis its
	// round-trip time.
	LastProbe  time.Time `json:"last_probe,omitzero"`
	LastResult string    `json:"last_result,omitempty"`
	RTTMillis  float64   `json:"rtt_ms"`
	// Flaps counts state changes since the target was created.
	Flaps int `json:"flaps"`
	// Override is the pool-wide operator override in force ("none",
	// "drain" or "disable"), OverrideReason its reason.
	Override       string `json:"override"`
	OverrideReason string `json:"override_reason,omitempty"`
	// InTraffic is true when the member has a destination in the pool's
	// services; Weight is its IPVS weight then (0 when drained).
	InTraffic bool   `json:"in_traffic"`
	Weight    uint32 `json:"weight"`
	// Why is the pool's reason for keeping the member in or out of
	// traffic, one of the Why* codes; WhyText says it in one line for
	// people ("failing its check (down: timeout), held by fail-open: in
	// traffic before the pool collapsed"). The reason is the pool's: an
	// override scoped to one VIP may still drain or remove the member's
	// destinations in that VIP's services (InTraffic and Weight show the
	// result). Both are empty from a daemon that does not give reasons.
	Why     string `json:"why,omitempty"`
	WhyText string `json:"why_text,omitempty"`
	// Stats sums the kernel's counters over the member's destinations
	// in every service of the pool's VIPs; nil when not read.
	Stats *DestStats `json:"stats,omitempty"`
}

// Reasons a member is in or out of traffic (Member.Why).
const (
	WhyHealthy      = "healthy"        // in: its check is up and fresh
	WhyNoVerdict    = "no-verdict"     // out: its check has no verdict yet
	WhyDown         = "down"           // out: its check is down
	WhyStale        = "stale"          // out: its facts are too old to trust
	WhyDrained      = "drained"        // in at weight 0: drained by an operator
	WhyDisabled     = "disabled"       // out: disabled by an operator
	WhyHeldFailOpen = "held-fail-open" // in although failing: the pool fails open and it was in traffic before the collapse
	WhyOutFailOpen  = "out-fail-open"  // out although the pool fails open: it was failing before the collapse
	WhyFailOpenAll  = "fail-open-all"  // in although failing: the pool fails open with no last good set, keeping every enabled member
)

// Actions an override request can ask for.
const (
	ActionDrain   = "drain"
	ActionDisable = "disable"
	ActionEnable  = "enable"
)

// OverrideRequest is the body of POST /v1/overrides.
type OverrideRequest struct {
	// Action is "drain", "disable" or "enable" (enable removes the
	// matching overrides: the resolver returns to health-driven control).
	Action string `json:"action"`
	// Resolver names the resolver.
	Resolver string `json:"resolver"`
	// Pool and VIP limit the override (at most one of them); empty means
	// every pool the resolver is a member of.
	Pool string `json:"pool,omitempty"`
	VIP  string `json:"vip,omitempty"`
	// Reason is stored and shown with the override.
	Reason string `json:"reason,omitempty"`
}

// Override is one operator override in force.
type Override struct {
	// Resolver, Pool and VIP are the override's target and scope (Pool
	// or VIP empty: not limited to one).
	Resolver string `json:"resolver"`
	Pool     string `json:"pool,omitempty"`
	VIP      string `json:"vip,omitempty"`
	// Action is "drain" or "disable".
	Action string `json:"action"`
	// Reason is the operator's text; Set is when it was set.
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	// By names who set it: "uid N" from the control socket's peer
	// credentials.
	By string `json:"by,omitempty"`
	// Orphaned is true when the resolver (or the pool or VIP it is
	// scoped to) is no longer in the configuration; the override is
	// kept and applies again if the name comes back.
	Orphaned bool `json:"orphaned,omitempty"`
}

// OverrideReply answers POST /v1/overrides.
type OverrideReply struct {
	// Message says in one line what changed ("bind-1 drained in pool
	// main (VIPs dns-v4)") or that nothing did.
	Message string `json:"message"`
	// Changed is false when the override was already in force (or, for
	// enable, when there was none).
	Changed bool `json:"changed"`
	// Overrides are all overrides in force after the request.
	Overrides []Override `json:"overrides"`
}

// Actions a GSLB request can ask for (lbctl gslb off, on, ttl).
const (
	GSLBOff = "off" // intelligent resolution off: static answers
	GSLBOn  = "on"  // back to dynamic answers (removes switches)
	GSLBTTL = "ttl" // raise the answers' TTL (Clear: remove raises)
)

// GSLBRequest is the body of POST /v1/gslb.
type GSLBRequest struct {
	// Action is "off", "on" or "ttl".
	Action string `json:"action"`
	// Name (a GSLB name) or Zone (a GSLB zone) limits the request (at
	// most one); both empty means every GSLB name (for on and ttl with
	// clear: every switch, or every raise).
	Name string `json:"name,omitempty"`
	Zone string `json:"zone,omitempty"`
	// Seconds is the TTL of a raise (ttl only); Clear removes raises
	// instead (ttl only).
	Seconds int  `json:"seconds,omitempty"`
	Clear   bool `json:"clear,omitempty"`
	// Reason is stored and shown with the entry; required for off and
	// a raise.
	Reason string `json:"reason,omitempty"`
}

// GSLBIntent is one GSLB emergency switch or TTL raise in force.
type GSLBIntent struct {
	// Kind is "off" (intelligent resolution off) or "ttl" (a TTL raise).
	Kind string `json:"kind"`
	// Name or Zone is the scope (both empty: every GSLB name); Scope
	// says it in words (GSLBScope).
	Name  string `json:"name,omitempty"`
	Zone  string `json:"zone,omitempty"`
	Scope string `json:"scope"`
	// Mode is "static" for a switch; Seconds the TTL of a raise.
	Mode    string `json:"mode,omitempty"`
	Seconds int    `json:"seconds,omitempty"`
	// Reason, Set and By are the audit: why, when and who.
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
	// Names are the configured GSLB names the entry applies to now
	// (a name switched off by a narrower entry too is listed by both).
	Names []string `json:"names"`
	// Orphaned is true when the name or zone is no longer in the
	// configuration; the entry is kept and applies again if it comes
	// back.
	Orphaned bool `json:"orphaned,omitempty"`
}

// GSLBResponder is the state of the GSLB responder.
type GSLBResponder struct {
	// On is true while it listens; Listen are the addresses bound
	// (ports picked for port 0 resolved).
	On     bool     `json:"on"`
	Listen []string `json:"listen"`
	// ListenError is why the configured listeners could not be opened
	// ("" when they were).
	ListenError string `json:"listen_error,omitempty"`
	// Serial is the zones' SOA serial; Zones the apexes served.
	Serial uint32   `json:"serial"`
	Zones  []string `json:"zones"`
	// LastBuild is when the answer snapshot was last built;
	// LastBuildError why the last attempt failed ("" when it worked:
	// on a failure the previous answers stay).
	LastBuild      time.Time `json:"last_build,omitzero"`
	LastBuildError string    `json:"last_build_error,omitempty"`
	// LastResort lists the names and types that answer only by their
	// last resort (no pool of any of their policies has a member up),
	// in configuration order. Fail-open is meant to be loud.
	LastResort []GSLBLastResort `json:"last_resort"`
	// Listeners are the serving verdicts of the configured listen
	// addresses, in configuration order: a listen address serves while
	// its socket is bound and an answer snapshot is in force.
	Listeners []GSLBListener `json:"listeners"`
	// Fronts are the encrypted fronts ([gslb.tls]) serving, DoH's then
	// DoT's; none without them.
	Fronts []GSLBFront `json:"fronts,omitempty"`
}

// GSLBFront is one transport of the GSLB responder's encrypted fronts
// and its listeners.
type GSLBFront struct {
	// Transport is "doh" (DNS over HTTPS, and the JSON API when
	// JSONPath is set) or "dot" (DNS over TLS).
	Transport string `json:"transport"`
	// Listen are the addresses bound (ports picked for port 0
	// resolved).
	Listen []string `json:"listen"`
	// DoHPath and JSONPath are the URL paths served over "doh"
	// (JSONPath "" while the JSON API is off).
	DoHPath  string `json:"doh_path,omitempty"`
	JSONPath string `json:"json_path,omitempty"`
	// Connections are the connections open on the listeners together;
	// MaxConnections is their cap.
	Connections    int `json:"connections"`
	MaxConnections int `json:"max_connections"`
	// CertSubject is the subject of the certificate served;
	// CertNotAfter when it expires.
	CertSubject  string    `json:"cert_subject"`
	CertNotAfter time.Time `json:"cert_not_after,omitzero"`
}

// GSLBListener is the serving verdict of one configured listen address of
// the GSLB responder.
type GSLBListener struct {
	// Listen is the address as configured.
	Listen string `json:"listen"`
	// Serving is the verdict; Reason says why, in one line.
	Serving bool   `json:"serving"`
	Reason  string `json:"reason"`
}

// GSLBLastResort is one name and type answering by its last resort.
type GSLBLastResort struct {
	// Name is the name's FQDN; Type "A" or "AAAA".
	Name string `json:"name"`
	Type string `json:"type"`
	// LastResort is what answers: "fail-open" (every member, as if up),
	// "static" (the name's static records) or "servfail".
	LastResort string `json:"last_resort"`
	// Warming is true when members are still without a first verdict:
	// the name answers by its last resort only until they have one.
	Warming bool `json:"warming,omitempty"`
	// Since is when the name started answering by its last resort.
	Since time.Time `json:"since,omitzero"`
}

// GSLBReply answers POST /v1/gslb.
type GSLBReply struct {
	// Message says in one line what changed, or that nothing did.
	Message string `json:"message"`
	// Changed is false when the request left the intent as it was.
	Changed bool `json:"changed"`
	// Intent lists every switch and raise in force after the request.
	Intent []GSLBIntent `json:"intent"`
}

// Event kinds.
const (
	EventState    = "state"    // a back end's health state changed
	EventPool     = "pool"     // a pool's verdict changed
	EventOverride = "override" // an operator override was set or removed
	EventIPVS     = "ipvs"     // an IPVS operation was applied (or failed)
	EventReload   = "reload"   // a reload was applied or rejected
	EventDaemon   = "daemon"   // the daemon started or is stopping
	EventGSLB     = "gslb"     // a GSLB emergency switch or TTL raise was set or removed
	// EventLastResort: a GSLB name started or stopped answering by its
	// last resort.
	EventLastResort = "last-resort"
	// EventServing: a VIP or a GSLB listen address started or stopped
	// serving (its serving verdict changed).
	EventServing = "serving"
	// EventFleet: the node lost or regained the fleet's etcd, or a node
	// joined or left its fleet view.
	EventFleet = "fleet"
	// EventClient: a client action (block, limit) was set, removed,
	// ended at its expiry, or failed to be enforced.
	EventClient = "client"
	// EventFlood: a flood alarm was raised or cleared.
	EventFlood = "flood"
	// EventBGP: a route was announced, changed or withdrawn, a BGP
	// session was established or lost, a host was drained or enabled.
	EventBGP = "bgp"
	// EventMissed stands, in a followed stream, for events the log
	// dropped before they could be sent (Seq 0).
	EventMissed = "missed"
)

// EventKinds returns every event kind, in the order of their constants.
func EventKinds() []string {
	return []string{EventState, EventPool, EventOverride, EventIPVS, EventReload, EventDaemon, EventGSLB, EventLastResort, EventServing, EventFleet, EventClient, EventFlood, EventBGP, EventMissed}
}

// Event is one entry of the event log (GET /v1/events).
type Event struct {
	// Seq numbers events from 1, without gaps, since the daemon started.
	Seq uint64 `json:"seq"`
	// Time is when the event happened.
	Time time.Time `json:"time"`
	// Kind is one of the Event* constants.
	Kind string `json:"kind"`
	// Subject is what the event is about: a target ("bind-1/recursive"),
	// a pool, a resolver, an IPVS operation's service.
	Subject string `json:"subject"`
	// Message is the event in one line.
	Message string `json:"message"`
	// Error is true for failures (a failed IPVS op, a rejected reload).
	Error bool `json:"error,omitempty"`
	// Routine is set on the events that are routine work rather than
	// news for people, to what work it is (one of the Routine*
	// constants): the page and lbctl events fold a run of them into one
	// line unless asked for everything. Empty for the events for people:
	// verdicts, operator actions and every failure.
	Routine string `json:"routine,omitempty"`
	// Verdict is set on a verdict (a pool's diagnosis, a back end's or a
	// GSLB member's state changed) to how it stands now: VerdictUp,
	// VerdictWarn or VerdictDown.
	Verdict string `json:"verdict,omitempty"`
}

// The kinds of routine work (Event.Routine).
const (
	// RoutineIPVS: an IPVS operation applied (create-service,
	// create-dest, update-dest, ...); the verdict that caused it is an
	// event of its own.
	RoutineIPVS = "ipvs-op"
	// RoutineIPVSDryRun: an IPVS operation computed in a dry run, NOT
	// applied.
	RoutineIPVSDryRun = "ipvs-op-dry-run"
	// RoutineStart: the daemon started.
	RoutineStart = "start"
	// RoutineFirstUp: a back end or GSLB member found up by its first
	// checks (a first verdict of down is for people).
	RoutineFirstUp = "first-up"
)

// Event.Verdict values.
const (
	VerdictUp   = "up"   // healthy, up
	VerdictWarn = "warn" // degraded, or not decided yet
	VerdictDown = "down" // failing: down, below its minimum, failing open
)

// EventsReply answers GET /v1/events without follow.
type EventsReply struct {
	// Events are the kept events after the requested sequence number,
	// oldest first.
	Events []Event `json:"events"`
	// Next is the sequence number to pass as after= to get only newer
	// events.
	Next uint64 `json:"next"`
	// Missed counts the events after the requested sequence number that
	// the log no longer keeps (it keeps the newest ones only).
	Missed uint64 `json:"missed"`
}

// ReloadReply answers a successful POST /v1/reload.
type ReloadReply struct {
	// Summary is the new configuration's one-line summary.
	Summary string `json:"summary"`
}

// Problem is one thing wrong with a configuration file.
type Problem struct {
	// File, Line, Key and Value locate the problem (Line 0, Key or
	// Value empty when unknown).
	File  string `json:"file"`
	Line  int    `json:"line,omitempty"`
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
	// Message says what is wrong; Text is the whole problem in one line,
	// as lbdnsd -check-config prints it.
	Message string `json:"message"`
	Text    string `json:"text"`
}

// PrefetchEntry is one kept-warm cache entry: a name and type at one
// resolver (and ECS partition).
type PrefetchEntry struct {
	// Name (with the final dot), Type (A, AAAA, ...), Resolver and
	// Partition (the ECS partition's name, empty without ECS) identify
	// the entry.
	Name      string `json:"name"`
	Type      string `json:"type"`
	Resolver  string `json:"resolver"`
	Partition string `json:"partition,omitempty"`
	// Mode is the resolver's refresh mode: "window" or "expiry".
	Mode        string    `json:"mode"`
	LastRefresh time.Time `json:"last_refresh,omitzero"`
	// TTLSeconds is the TTL the resolver gave at LastRefresh;
	// RemainingSeconds what is left of it now.
	TTLSeconds       int       `json:"ttl_s"`
	RemainingSeconds int       `json:"remaining_s"`
	NextRun          time.Time `json:"next_run,omitzero"`
	// State is "ok", "expired" (a window entry whose last re-fetch found
	// it expired: the product did not refresh in its window, clients met
	// the expiry), "failing", "parked" (resolver unhealthy) or "pending".
	State string `json:"state"`
	// LastError is the last failure's reason; Failures counts failed
	// queries since the entry was created.
	LastError string `json:"last_error,omitempty"`
	Failures  int    `json:"failures"`
	// Fetches counts answers the resolver had just fetched upstream (one
	// per cache entry: partitions sharing one count it once); Expired
	// counts the times a window entry was found expired.
	Fetches int `json:"fetches"`
	Expired int `json:"expired"`
	// GapMillis is, for the last re-fetch after expiry, how long after
	// the expiry the answer arrived (clients asking in between waited for
	// the recursion); MaxGapMillis the longest such gap. Zero until the
	// entry was re-fetched after an expiry.
	GapMillis    float64 `json:"gap_ms"`
	MaxGapMillis float64 `json:"max_gap_ms"`
}

// ErrorReply is the body of every 4xx and 5xx reply of the control and
// status servers.
type ErrorReply struct {
	// Error says what is wrong in one line.
	Error string `json:"error"`
	// Problems lists every configuration problem when a reload was
	// rejected.
	Problems []Problem `json:"problems,omitempty"`
	// Unavailable names what the daemon needed and could not reach when
	// it refused a change for that reason (UnavailableEtcd), "" otherwise.
	Unavailable string `json:"unavailable,omitempty"`
}

// UnavailableEtcd is ErrorReply.Unavailable of a change refused because
// the fleet's etcd cannot be reached (HTTP 503): nothing was changed, on
// this host or elsewhere.
const UnavailableEtcd = "etcd"

// UnconfirmedEtcd is ErrorReply.Unavailable of a change sent to the
// fleet's etcd that etcd did not confirm in time (HTTP 503): it may have
// been applied, and if it was, every host applies it from etcd. lbctl
// exits 4 (unknown), as for a request that got no reply.
const UnconfirmedEtcd = "etcd-unconfirmed"

// Backend is what the servers need from the daemon. Its methods are
// called concurrently.
type Backend interface {
	// Status returns a snapshot of the daemon's state.
	Status(ctx context.Context) (*Status, error)
	// SetOverride applies an override request. by names the requester
	// ("uid 0").
	SetOverride(ctx context.Context, req OverrideRequest, by string) (*OverrideReply, error)
	// SetGSLB applies a GSLB emergency request (off, on, ttl). by names
	// the requester.
	SetGSLB(ctx context.Context, req GSLBRequest, by string) (*GSLBReply, error)
	// Reload loads the configuration file again and applies it; an
	// invalid one returns an *Error of kind InvalidConfig with every
	// Problem.
	Reload(ctx context.Context) (*ReloadReply, error)
}

// GSLBExplainRequest is the body of POST /v1/gslb/explain (GET
// /v1/gslb/explain takes the same fields as query parameters): the
// question to explain, answered by the GSLB responder's snapshot in
// force as if it came over the wire.
type GSLBExplainRequest struct {
	// Name is the question name (required; trailing dot optional).
	Name string `json:"name"`
	// Type is the question type: "A" (the default), "AAAA", or any other
	// type name ("TXT" for the whoami name, say).
	Type string `json:"type,omitempty"`
	// Client is the address the query comes from (the recursive
	// resolver); default 0.0.0.0.
	Client string `json:"client,omitempty"`
	// ECS is the EDNS Client Subnet the query carries: a prefix
	// ("198.51.100.0/24") or an address (a /32 or /128); empty: none.
	// Over the JSON API it is edns_client_subnet=.
	ECS string `json:"ecs,omitempty"`
	// Via is the front the query comes over: "udp" (the default),
	// "tcp", "dot", "doh" or "json" (the JSON API).
	Via string `json:"via,omitempty"`
	// Peer is the connection's source address (over udp and tcp the
	// same as Client; give one of the two).
	Peer string `json:"peer,omitempty"`
	// ForwardedFor is the request's X-Forwarded-For header value (doh,
	// json).
	ForwardedFor string `json:"forwarded_for,omitempty"`
	// ProxySource is the source address the PROXY v2 header sent first
	// on the connection gives (dot, doh, json).
	ProxySource string `json:"proxy_source,omitempty"`
	// IP is the JSON API's ip= parameter (json).
	IP string `json:"ip,omitempty"`
}

// The fronts of GSLBExplainRequest.Via.
const (
	// ViaUDP: a query over UDP (the default).
	ViaUDP = "udp"
	// ViaTCP: a query over TCP.
	ViaTCP = "tcp"
	// ViaDoT: DNS over TLS.
	ViaDoT = "dot"
	// ViaDoH: DNS over HTTPS.
	ViaDoH = "doh"
	// ViaJSON: the JSON API.
	ViaJSON = "json"
)

// Vias are the values GSLBExplainRequest.Via takes, in the order help
// names them.
func Vias() []string { return []string{ViaUDP, ViaTCP, ViaDoT, ViaDoH, ViaJSON} }

// Check returns what is wrong with the combination of r's front inputs
// (nil: nothing), one problem per element, each naming the field: a
// front other than Vias, X-Forwarded-For but over doh or json, a PROXY
// header's source over udp or tcp, ip= but over json, a Client and a
// Peer that differ, a Client over a front other than udp or tcp. The
// values themselves are checked by the responder.
func (r GSLBExplainRequest) Check() []string {
	var probs []string
	via := r.Via
	if via == "" {
		via = ViaUDP
	}
	if !slices.Contains(Vias(), via) {
		return []string{"via: want " + strings.Join(Vias(), ", ") + ", not " + strconv.Quote(r.Via)}
	}
	stream := via == ViaUDP || via == ViaTCP
	if r.ForwardedFor != "" && via != ViaDoH && via != ViaJSON {
		probs = append(probs, "forwarded_for: X-Forwarded-For is a header of doh and json requests, not of "+via)
	}
	if r.ProxySource != "" && stream {
		probs = append(probs, "proxy_source: a PROXY header goes to dot, doh and json, not to "+via)
	}
	if r.IP != "" && via != ViaJSON {
		probs = append(probs, "ip: ip= is a parameter of the JSON API (via json), not of "+via)
	}
	if r.Client != "" && !stream {
		probs = append(probs, "client: the query's source over udp or tcp; over "+via+" give peer, the connection's source")
	}
	if r.Client != "" && r.Peer != "" && r.Client != r.Peer {
		probs = append(probs, "client and peer: both name the query's source over "+via+"; give one")
	}
	return probs
}

// GSLBExplainReply answers an explain request: the reply the responder
// gives and how it was chosen (its trace), from the code path that
// answers queries.
type GSLBExplainReply struct {
	// Name and Type are the question as answered (lower case, fully
	// qualified); Serial the SOA serial of the snapshot that answered.
	Name   string `json:"name"`
	Type   string `json:"type"`
	Serial uint32 `json:"serial"`
	// Rcode is the response code ("NOERROR", "NXDOMAIN", "SERVFAIL").
	Rcode string `json:"rcode"`
	// Answer and Authority are the reply's records in presentation
	// format.
	Answer    []string `json:"answer"`
	Authority []string `json:"authority,omitempty"`
	// GSLBName is the GSLB name that answered ("" for zone data and
	// static records).
	GSLBName string `json:"gslb_name,omitempty"`
	// Client is the address the location was looked up for, ClientFrom
	// where it came from: "ecs" or "source"; ECS is the query's Client
	// Subnet as masked ("" without one).
	Client     string `json:"client"`
	ClientFrom string `json:"client_from"`
	ECS        string `json:"ecs,omitempty"`
	// Via is the front the query came over ("udp" when the request
	// named none); LocatedBy says in one line where that front located
	// the query's source and why ("X-Forwarded-For 203.0.113.7 (peer
	// 10.0.0.5 is a trusted proxy)"); LocatedFrom says it for programs:
	// "source" (udp and tcp), "connection", "proxy",
	// "x-forwarded-for" or "ip".
	Via         string `json:"via"`
	LocatedBy   string `json:"located_by"`
	LocatedFrom string `json:"located_from"`
	// Refused, when set, says why the front answers no query of the
	// request (ip= without allow_client_ip, a PROXY header it does not
	// read): the fields of the answer are then empty. Status is the
	// HTTP status the JSON API answers it with (403; 0 when the
	// connection itself fails).
	Refused string `json:"refused,omitempty"`
	Status  int    `json:"status,omitempty"`
	// Location is the topology's answer for Client.
	Location GSLBExplainLocation `json:"location"`
	// Policies are the name's policies in the order they were tried.
	Policies []GSLBExplainPolicy `json:"policies,omitempty"`
	// LastResort is the last resort taken ("fail-open", "static",
	// "servfail"; "" when a policy answered); Warming is set when it was
	// taken because members are still without a verdict; Static when
	// the name answered its static set.
	LastResort string `json:"last_resort,omitempty"`
	Warming    bool   `json:"warming,omitempty"`
	Static     bool   `json:"static,omitempty"`
	// Addresses are the addresses answered; TTL is the answer's TTL.
	Addresses []string `json:"addresses"`
	TTL       uint32   `json:"ttl"`
	// Scope is the ECS SCOPE PREFIX-LENGTH the reply carries (0 without
	// ECS in the query).
	Scope int `json:"scope"`
}

// GSLBExplainLocation is where the topology puts an explained client.
type GSLBExplainLocation struct {
	// Labels are the location labels by level (empty: no map entry).
	Labels map[string]string `json:"labels"`
	// Prefix is the most specific map entry that matched ("" when none
	// did); Scope the prefix length over which the location holds.
	Prefix string `json:"prefix,omitempty"`
	Scope  int    `json:"scope"`
}

// GSLBExplainPolicy is one policy of a name as it was tried.
type GSLBExplainPolicy struct {
	// Match is the policy's match on location labels (empty: global).
	Match map[string]string `json:"match"`
	// Matched is set when the client's location matched it; Answered
	// when it gave the answer.
	Matched  bool `json:"matched"`
	Answered bool `json:"answered"`
	// Pools are the pools tried for it: its own, then its fallback
	// chain as far as it was followed.
	Pools []GSLBExplainPool `json:"pools,omitempty"`
}

// GSLBExplainPool is one pool as it was tried.
type GSLBExplainPool struct {
	// Name and Algorithm are the pool's; Healthy counts its members up.
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Healthy   int    `json:"healthy"`
	// Members are the pool's members of the family asked, with their
	// states; Chosen marks those answered.
	Members []GSLBExplainMember `json:"members"`
}

// GSLBExplainMember is one member of a pool as the algorithm saw it.
type GSLBExplainMember struct {
	// Name is the member's configured name, Address the address it is
	// answered as, State "up", "down" or "unknown", Weight its weight,
	// Chosen set when the algorithm answered it.
	Name    string `json:"name"`
	Address string `json:"address"`
	State   string `json:"state"`
	Weight  int    `json:"weight"`
	Chosen  bool   `json:"chosen"`
}

// GSLBBackend answers the GSLB requests of the control socket: the GSLB
// responder, which holds the answer snapshot in force.
type GSLBBackend interface {
	// Explain answers req from the snapshot in force and says how the
	// answer was chosen. It returns a *Refusal: Malformed for a
	// malformed request, NotFound for a name the responder does not
	// serve (outside every zone, or missing: NXDOMAIN), Unavailable when
	// the responder is off.
	Explain(ctx context.Context, req GSLBExplainRequest) (*GSLBExplainReply, error)
}

// FleetStatus is GET /v1/fleet: the fleet of LB hosts sharing intent
// through etcd, as this node reads it.
type FleetStatus struct {
	// On is whether the daemon is in a fleet ([fleet] configured).
	On bool `json:"on"`
	// Node, Location and Cluster are this node's [fleet] keys.
	Node     string `json:"node,omitempty"`
	Location string `json:"location,omitempty"`
	Cluster  string `json:"cluster,omitempty"`
	// Heartbeat says whether this node's heartbeat lease is alive.
	Heartbeat bool `json:"heartbeat"`
	// Error is why the fleet view could not be read ("" when it was):
	// Nodes is then empty.
	Error string `json:"error,omitempty"`
	// Etcd is this node's link to the fleet's etcd (absent when the
	// daemon is in no fleet).
	Etcd *FleetEtcd `json:"etcd,omitempty"`
	// Nodes are the nodes whose heartbeats are alive, by name.
	Nodes []FleetNode `json:"nodes"`
	// Verdicts is where this node's GSLB answers take the members'
	// states from: "fleet" (the probers' majority verdicts) or "own
	// probes" (etcd has not answered for longer than the lease TTL, or
	// the fleet view is not read yet: the node probes every member).
	Verdicts string `json:"verdicts,omitempty"`
	// VerdictsWhy says why the verdicts are the node's own ("" for the
	// fleet's).
	VerdictsWhy string `json:"verdicts_why,omitempty"`
	// EtcdContact is when etcd (a quorum) last answered this node.
	EtcdContact time.Time `json:"etcd_contact,omitzero"`
	// Withdrawn is set while this node withdrew its votes: most of its
	// canaries fail (a prober cut off from the members is no down vote).
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Probers are the live probers (heartbeat alive, intent current,
	// not withdrawn), by name.
	Probers []string `json:"probers,omitempty"`
	// ProbersPerMember is [fleet] probers_per_member (k).
	ProbersPerMember int `json:"probers_per_member,omitempty"`
	// ProbedMembers is how many of the Members this node probes.
	ProbedMembers int `json:"probed_members"`
	Members       int `json:"members"`
	// Canaries is how many canaries this node probes, its own addresses
	// left out.
	Canaries int `json:"canaries"`
	// CanaryAddress is the canary this node advertises to the others
	// ("" when none); CanaryFrom says how it was chosen, or why there is
	// none.
	CanaryAddress string `json:"canary_address,omitempty"`
	CanaryFrom    string `json:"canary_from,omitempty"`
	// CanariesOwn are the canaries (configured, or advertised by other
	// nodes) left out because they are this node itself.
	CanariesOwn []string `json:"canaries_own,omitempty"`
	// CanaryWarnings say what is wrong with the fleet's canaries: several
	// nodes advertising one address (shared, anycast), a node without a
	// canary, a node (this one included) probing fewer than two.
	CanaryWarnings []string `json:"canary_warnings,omitempty"`
	// VoteWrites counts the vote writes (puts and deletes) this node
	// made to etcd since it started.
	VoteWrites uint64 `json:"vote_writes"`
}

// FleetEtcd is a node's link to the fleet's etcd, in GET /v1/fleet and
// in the status (Status.Fleet).
type FleetEtcd struct {
	// Reachable is false while the node cannot reach etcd (no member
	// with a leader answers): it then serves the intent it applied last,
	// refuses every intent change (HTTP 503, ErrorReply.Unavailable
	// "etcd") and catches up whole when etcd is back.
	Reachable bool `json:"reachable"`
	// Since is when Reachable last changed (the start counts).
	Since time.Time `json:"since"`
	// Error is the last failure of etcd, "" while it is reachable.
	Error string `json:"error,omitempty"`
	// IntentRevision is the revision of the intent in force;
	// IntentSource where it came from: "etcd", or "local copy" when the
	// daemon started without etcd and serves the copy it kept in its
	// state directory of the intent it last applied ("none" without
	// one).
	IntentRevision uint64 `json:"intent_revision"`
	IntentSource   string `json:"intent_source"`
}

// The sources of the intent in force of a node in a fleet
// (FleetEtcd.IntentSource).
const (
	IntentFromEtcd      = "etcd"
	IntentFromLocalCopy = "local copy"
	IntentFromNone      = "none"
)

// FleetNode is one node of the fleet view.
type FleetNode struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	Cluster  string `json:"cluster,omitempty"`
	// Version is the node's lbdnsd build.
	Version string `json:"version"`
	// ConfigHash identifies the node's configuration (without [fleet]).
	ConfigHash string `json:"config_hash"`
	// ConfigSections are the node's per-table configuration hashes
	// (fleet.ConfigSections; none from an older node).
	ConfigSections map[string]string `json:"config_sections,omitempty"`
	// IntentRevision is the intent revision the node applied;
	// CurrentRevision the one in force for its scope.
	IntentRevision  uint64 `json:"intent_revision"`
	CurrentRevision uint64 `json:"current_revision"`
	// Serial is the GSLB zones' SOA serial the node answers.
	Serial uint32 `json:"serial"`
	// Started is when the node's daemon started; Beat when it last wrote
	// its heartbeat, AgeSeconds how long before the reading that was.
	Started    time.Time `json:"started"`
	Beat       time.Time `json:"beat"`
	AgeSeconds float64   `json:"age_seconds"`
	// Odd says how the node differs from the rest (empty: it does not).
	Odd []string `json:"odd,omitempty"`
	// Withdrawn is set while the node withdrew its votes (most of its
	// canaries fail).
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Drained is set while the node's host is drained (lbctl host
	// drain) or stopping: its route announcements are going away.
	Drained bool `json:"drained,omitempty"`
	// Canary is the canary the node advertises ("" when none); Canaries
	// how many canaries it probes, its own left out (absent when it does
	// not say).
	Canary   string `json:"canary,omitempty"`
	Canaries *int   `json:"canaries,omitempty"`
}

// FleetBackend is the part of a Backend that answers GET /v1/fleet; a
// Backend without it answers that the daemon is in no fleet.
type FleetBackend interface {
	// Fleet reads the fleet view.
	Fleet(ctx context.Context) (*FleetStatus, error)
}
