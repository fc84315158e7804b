package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"lbdns/configs"
)

// Heartbeat is what a node says of itself to the fleet, kept under its
// lease: while the lease lives the node is in the fleet view, and what
// it says is fact, not intent.
type Heartbeat struct {
	// Name, Location and Cluster are the node's [fleet] keys.
	Name     string `json:"name"`
	Location string `json:"location"`
	Cluster  string `json:"cluster,omitempty"`
	// Version is the lbdnsd build's module version.
	Version string `json:"version"`
	// ConfigHash is ConfigHash of the configuration in force.
	ConfigHash string `json:"config_hash"`
	// ConfigSections are ConfigSections of the configuration in force:
	// a short hash per table, so that the fleet view names the tables
	// a node differs in (nil from a node before them: compared by
	// ConfigHash alone).
	ConfigSections map[string]string `json:"config_sections,omitempty"`
	// IntentRevision is the intent revision the node has applied.
	IntentRevision uint64 `json:"intent_revision"`
	// Serial is the GSLB zones' SOA serial the node answers (0: no
	// responder, or not built yet).
	Serial uint32 `json:"serial"`
	// Started is when the node's daemon started; Beat when the node
	// wrote this heartbeat.
	Started time.Time `json:"started"`
	Beat    time.Time `json:"beat"`
	// Canary is an address the other probers connect to (TCP) as one of
	// their canaries: the node's [fleet] canary_address, or the one it
	// chose (ChooseCanary); "" when it has none.
	Canary string `json:"canary,omitempty"`
	// Withdrawn is set while the node withdrew its votes because most
	// of its canaries fail (CutOff): it votes nothing and is no prober
	// of Live.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Drained is set while the node's host is drained (lbctl host
	// drain) or stopping: its announcements are going away.
	Drained bool `json:"drained,omitempty"`
	// Announced are the prefixes the node announces over BGP now, each
	// with its grade, in prefix order (none without [bgp]).
	Announced []Announcement `json:"announced,omitempty"`
	// Canaries is how many canaries the node probes, its own addresses
	// left out (nil: not counted yet, or a build that does not say).
	Canaries *int `json:"canaries,omitempty"`
}

// Grades of an Announcement.
const (
	// GradeUp is a prefix announced as serving (med_up).
	GradeUp = "up"
	// GradeDegraded is a VIP announced as serving degraded
	// (med_degraded).
	GradeDegraded = "degraded"
	// GradeHeld is a VIP that does not serve, kept announced (with
	// med_degraded) by the fleet's announcement floor.
	GradeHeld = "held"
	// GradeDraining is a prefix announced with GRACEFUL_SHUTDOWN, to be
	// withdrawn (host drain, lbdnsd stopping).
	GradeDraining = "draining"
)

// Announcement is one prefix a node announces.
type Announcement struct {
	Prefix netip.Prefix `json:"prefix"`
	// Grade is GradeUp, GradeDegraded, GradeHeld or GradeDraining.
	Grade string `json:"grade"`
}

// Same reports whether h and g say the same, apart from Beat.
func (h Heartbeat) Same(g Heartbeat) bool {
	h.Beat, g.Beat = time.Time{}, time.Time{}
	if len(h.Announced) == 0 && len(g.Announced) == 0 {
		h.Announced, g.Announced = nil, nil
	}
	return reflect.DeepEqual(h, g)
}

// Announcers returns, for every prefix announced in the fleet view
// nodes, the names of the nodes other than self that count toward the
// announcement floor for it, by name: a node counts while its lease is
// alive (it is in the view), it is not drained, it has applied the
// intent revision in force for its scope (a node behind may be about to
// be drained), and it announces the prefix up or degraded (a prefix
// held by the floor or draining does not count: two hosts holding a
// prefix for each other would otherwise both let it go).
func Announcers(nodes []Node, self string) map[netip.Prefix][]string {
	out := map[netip.Prefix][]string{}
	for _, n := range nodes {
		if n.Name == self || n.Drained || n.IntentRevision != n.CurrentRevision {
			continue
		}
		for _, a := range n.Announced {
			if a.Grade == GradeUp || a.Grade == GradeDegraded {
				out[a.Prefix] = append(out[a.Prefix], n.Name)
			}
		}
	}
	for p := range out {
		slices.Sort(out[p])
		out[p] = slices.Compact(out[p])
	}
	return out
}

// Version returns the running binary's module version ("(devel)" for a
// build from a work tree, "unknown" without build information).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "unknown"
	}
	return bi.Main.Version
}

// ConfigHash returns a short hash of cfg's content that nodes running
// the same configuration share, whatever their own keys: the hash of
// ConfigSections' hashes.
func ConfigHash(cfg *configs.Config) (string, error) {
	h, _, err := ConfigHashes(cfg)
	return h, err
}

// ConfigSections returns a short hash of each top-level table of cfg
// (named as in the file: "gslb", "vip", "resolver"; a table of named
// tables, [check.NAME], one per name: "check.recursive"), without what
// is each host's own, which differs between nodes by design:
//
//   - [daemon] whole (state directory, control socket, status_listen,
//     log level) and [fleet] whole (node name, location, cluster, etcd
//     endpoints and certificates, canaries);
//   - [gslb.server] listen (the host's GSLB listen addresses);
//   - [bgp] router_id and its [[bgp.peer]] (each host's own routers,
//     addresses, passwords and hold times);
//   - [[vip]] interface (where the host keeps the VIP address);
//   - [dnstap] unix and tcp (the intake's listen addresses);
//   - the file's path.
func ConfigSections(cfg *configs.Config) (map[string]string, error) {
	_, sec, err := ConfigHashes(cfg)
	return sec, err
}

// ConfigHashes returns ConfigHash and ConfigSections of cfg ("" and nil
// for a nil cfg).
func ConfigHashes(cfg *configs.Config) (string, map[string]string, error) {
	if cfg == nil {
		return "", nil, nil
	}
	c := sharedConfig(cfg)
	out := map[string]string{}
	rv := reflect.ValueOf(c).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || name == "" || name == "-" || name == "daemon" || name == "fleet" {
			continue
		}
		v := rv.Field(i)
		if v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String {
			for _, k := range v.MapKeys() {
				sum, err := shortHash(v.MapIndex(k).Interface())
				if err != nil {
					return "", nil, err
				}
				out[name+"."+k.String()] = sum
			}
			continue
		}
		sum, err := shortHash(v.Interface())
		if err != nil {
			return "", nil, err
		}
		out[name] = sum
	}
	names := slices.Sorted(maps.Keys(out))
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s\n", n, out[n])
	}
	return hex.EncodeToString(h.Sum(nil)[:6]), out, nil
}

// sharedConfig returns a copy of cfg without what is each host's own
// (ConfigSections' list); cfg is left as it is.
func sharedConfig(cfg *configs.Config) *configs.Config {
	c := *cfg
	c.Fleet, c.Path, c.Daemon = nil, "", configs.Daemon{}
	c.GSLB.Server.Listen, c.GSLB.Server.ListenAddrs = nil, nil
	c.BGP.RouterID, c.BGP.RouterAddr, c.BGP.Peers = "", netip.Addr{}, nil
	c.VIPs = slices.Clone(c.VIPs)
	for i := range c.VIPs {
		c.VIPs[i].Interface = ""
	}
	if c.Dnstap != nil {
		d := *c.Dnstap
		d.Unix, d.TCP = "", ""
		c.Dnstap = &d
	}
	return &c
}

// shortHash is the first 6 bytes of the SHA-256 of v's JSON, in hex.
func shortHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("fleet: config hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6]), nil
}

// Node is one node of the fleet view: its heartbeat and what the reader
// made of it.
type Node struct {
	Heartbeat
	// Age is how long ago the heartbeat was written, by the reader's
	// clock (clock skew between the hosts shows in it).
	Age time.Duration
	// CurrentRevision is the intent revision in force for the node's
	// scope (the fleet's intent and its cluster's or host's), as the
	// reader read it.
	CurrentRevision uint64
	// Odd says, one reason each, how the node differs from the rest:
	// intent not applied, another configuration than its cluster's
	// majority, another SOA serial than the fleet's majority.
	Odd []string
}

// Compare fills every node's Odd and returns the nodes by name. A node
// is odd when it has not applied the intent revision in force for its
// scope, when its configuration hash is not that of most nodes of its
// cluster (the nodes without a cluster compared together), or when its
// SOA serial is not that of most nodes; with no majority (two nodes that
// differ) each differing node is flagged.
func Compare(nodes []Node) []Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	for i := range out {
		out[i].Odd = nil
		if n := &out[i]; n.IntentRevision != n.CurrentRevision {
			n.Odd = append(n.Odd, fmt.Sprintf("intent revision %d applied, %d in force", n.IntentRevision, n.CurrentRevision))
		}
	}
	byCluster := map[string][]int{}
	for i, n := range out {
		byCluster[n.Cluster] = append(byCluster[n.Cluster], i)
	}
	for _, idx := range byCluster {
		flagConfig(out, idx)
	}
	all := make([]int, len(out))
	for i := range all {
		all[i] = i
	}
	flagMinority(out, all, func(n Node) string { return fmt.Sprint(n.Serial) }, "SOA serial %s, most nodes answer %s", "SOA serial %s, the nodes' differ")
	return out
}

// flagConfig flags the nodes idx of out (one cluster) whose
// configuration hash is not the majority's (flagMinority), and names in
// the reason the tables in which the node's ConfigSections differ from
// most of the nodes idx that carry them.
func flagConfig(out []Node, idx []int) {
	before := make([]int, len(out))
	for _, i := range idx {
		before[i] = len(out[i].Odd)
	}
	flagMinority(out, idx, func(n Node) string { return n.ConfigHash }, "configuration %s, most of its cluster run %s", "configuration %s, the cluster's differ")
	for _, i := range idx {
		if len(out[i].Odd) == before[i] || out[i].ConfigSections == nil {
			continue
		}
		if d := sectionsDiffering(out, idx, i); len(d) > 0 {
			out[i].Odd[len(out[i].Odd)-1] += ": differs in [" + strings.Join(d, "], [") + "]"
		}
	}
}

// sectionsDiffering returns, in name order, the tables in which node i
// of out differs from the strict majority of the nodes idx that carry
// ConfigSections (a table a node lacks counts as one value); a table
// without such a majority is named too.
func sectionsDiffering(out []Node, idx []int, i int) []string {
	names := map[string]bool{}
	var with []int
	for _, j := range idx {
		if out[j].ConfigSections == nil {
			continue
		}
		with = append(with, j)
		for n := range out[j].ConfigSections {
			names[n] = true
		}
	}
	var diff []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		count := map[string]int{}
		for _, j := range with {
			count[out[j].ConfigSections[name]]++
		}
		if len(count) == 1 {
			continue
		}
		if c := count[out[i].ConfigSections[name]]; 2*c <= len(with) {
			diff = append(diff, name)
		}
	}
	return diff
}

// flagMinority flags the nodes idx of out whose key is not the strict
// majority's (withMajority), or, with no strict majority and more than
// one key, every node (noMajority).
func flagMinority(out []Node, idx []int, key func(Node) string, withMajority, noMajority string) {
	if len(idx) < 2 {
		return
	}
	count := map[string]int{}
	for _, i := range idx {
		count[key(out[i])]++
	}
	if len(count) == 1 {
		return
	}
	major, best := "", 0
	for k, c := range count {
		if c > best || c == best && k < major {
			major, best = k, c
		}
	}
	for _, i := range idx {
		k := key(out[i])
		switch {
		case 2*best > len(idx) && k != major:
			out[i].Odd = append(out[i].Odd, fmt.Sprintf(withMajority, k, major))
		case 2*best <= len(idx):
			out[i].Odd = append(out[i].Odd, fmt.Sprintf(noMajority, k))
		}
	}
}

// Beat is what the Announcer says of this host in its fleet heartbeat.
type Beat struct {
	// Drained is set while the host is drained or lbdnsd stops with
	// drain_on_stop.
	Drained bool
	// Announced are the prefixes announced, graded (announce.Announcements).
	Announced []Announcement
}
