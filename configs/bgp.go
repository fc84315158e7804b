package configs

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// BGP is the embedded BGP speaker that announces the VIPs and the GSLB
// listen addresses while they serve ([bgp]). Without the section nothing
// is announced and no session is opened.
type BGP struct {
	// RouterID is the speaker's BGP identifier, an IPv4 address. Required.
	RouterID string `toml:"router_id"`
	// LocalAS is the speaker's AS number, 1..4294967295 (not 23456,
	// AS_TRANS). Required.
	LocalAS int `toml:"local_as"`
	// ListenPort is the TCP port the speaker accepts sessions on from the
	// configured peers only, 1..65535, or -1 not to listen (the speaker
	// then only connects out). Default 179.
	ListenPort int `toml:"listen_port"`
	// MEDUp is the MED of a serving prefix. Default 100.
	MEDUp int `toml:"med_up"`
	// MEDDegraded is the MED of a VIP that serves degraded (its pool below
	// min_healthy or failing open); it must be worse (higher) than
	// MEDUp. Default 1000.
	MEDDegraded int `toml:"med_degraded"`
	// CommunitiesUp are the communities ("ASN:VALUE") of a serving prefix.
	// Default none.
	CommunitiesUp []string `toml:"communities_up"`
	// CommunitiesDegraded are the communities of a degraded VIP. Default
	// none.
	CommunitiesDegraded []string `toml:"communities_degraded"`
	// DrainDelay is how long lbctl host drain keeps the announcements,
	// marked with the graceful-shutdown community 65535:0, before it
	// withdraws them, 0s..1h. Default 30s.
	DrainDelay Duration `toml:"drain_delay"`
	// MinAnnouncing is the fleet-wide announcement floor: with [fleet],
	// a VIP that stops serving while not truly dead (a service of it
	// still takes traffic) stays announced, with med_degraded, while
	// fewer than this many other hosts of the fleet announce it; 0 turns
	// the floor off. It needs [fleet]. Default 0.
	MinAnnouncing int `toml:"min_announcing"`
	// DrainOnStop makes lbdnsd drain before it exits on SIGTERM: every
	// announcement gets GRACEFUL_SHUTDOWN for DrainOnStopDelay, then is
	// withdrawn. Default false (withdrawn at once).
	DrainOnStop bool `toml:"drain_on_stop"`
	// DrainOnStopDelay is how long a stop keeps the announcements marked
	// GRACEFUL_SHUTDOWN, 1s..MaxBGPDrainOnStopDelay. Default 5s.
	DrainOnStopDelay Duration `toml:"drain_on_stop_delay"`
	// Peers are the routers the speaker opens sessions with ([[bgp.peer]]).
	// At least one.
	Peers []BGPPeer `toml:"peer"`

	// Enabled is set by Load when the file has a [bgp] section.
	Enabled bool `toml:"-"`
	// RouterAddr is RouterID parsed (set by Load).
	RouterAddr netip.Addr `toml:"-"`
	// Up and Degraded are the communities parsed (set by Load).
	Up, Degraded []Community `toml:"-"`
}

// BGPPeer is one router of [[bgp.peer]].
type BGPPeer struct {
	// Address is the router's address (IPv4 or IPv6). Required.
	Address string `toml:"address"`
	// AS is the router's AS number. Required.
	AS int `toml:"as"`
	// Port is the router's BGP port, 1..65535. Default 179.
	Port int `toml:"port"`
	// HoldTime is the hold time proposed in OPEN: 0s (no keepalives) or
	// 3s..65535s, whole seconds. Default 90s.
	HoldTime Duration `toml:"hold_time"`
	// Keepalive is the keepalive interval, whole seconds, below HoldTime
	// (0s when HoldTime is 0s). Default a third of HoldTime.
	Keepalive Duration `toml:"keepalive"`
	// Password is the TCP MD5 signature key (RFC 2385) shared with the
	// router. Default none.
	Password string `toml:"password"`
	// BFD turns on BFD (RFC 5880, single hop, UDP 3784) with the router,
	// so that a dead link or host is seen within a second. Default false.
	BFD bool `toml:"bfd"`
	// Multihop is the TTL of an eBGP session with a router that is not
	// on a connected network, 0 (directly connected) or 2..255. Default 0.
	Multihop int `toml:"multihop"`

	// Addr is Address parsed (set by Load).
	Addr netip.Addr `toml:"-"`
}

// Community is a BGP community (RFC 1997): the high 16 bits an AS number,
// the low 16 bits a value.
type Community uint32

// GracefulShutdown is the well-known GRACEFUL_SHUTDOWN community 65535:0
// (RFC 8326) that lbctl host drain adds to every announcement.
const GracefulShutdown Community = 0xFFFF0000

// String formats c as "ASN:VALUE".
func (c Community) String() string { return fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xFFFF) }

// ParseCommunity parses "ASN:VALUE" with both parts 0..65535.
func ParseCommunity(s string) (Community, error) {
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("community %q: want ASN:VALUE such as 65001:100", s)
	}
	a, err := strconv.ParseUint(hi, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("community %q: AS part must be 0..65535", s)
	}
	v, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("community %q: value part must be 0..65535", s)
	}
	return Community(a<<16 | v), nil
}

// Defaults and limits of [bgp].
const (
	DefaultBGPListenPort  = 179
	DefaultBGPPeerPort    = 179
	DefaultBGPMEDUp       = 100
	DefaultBGPMEDDegraded = 1000
	DefaultBGPDrainDelay  = 30 * time.Second
	MaxBGPDrainDelay      = time.Hour
	// DefaultBGPDrainOnStopDelay and MaxBGPDrainOnStopDelay bound
	// drain_on_stop_delay; the systemd unit's TimeoutStopSec allows for
	// the longest, with the withdrawal after it.
	DefaultBGPDrainOnStopDelay = 5 * time.Second
	MaxBGPDrainOnStopDelay     = 10 * time.Second
	// BGPStopTimeout bounds the withdrawal of every route when lbdnsd
	// stops (after the drain on stop, if any).
	BGPStopTimeout = 5 * time.Second
	// MaxBGPMinAnnouncing bounds min_announcing.
	MaxBGPMinAnnouncing = 1000
	DefaultBGPHoldTime  = 90 * time.Second
	MinBGPHoldTime      = 3 * time.Second
	MaxBGPHoldTime      = 65535 * time.Second
	asTrans             = 23456
)

// decodeBGP decodes [bgp].
func (d *decoder) decodeBGP(raw map[string]any) {
	_, d.cfg.BGP.Enabled = raw["bgp"]
	d.bgpRaw, d.bgpOK = d.table("bgp", raw, &d.cfg.BGP)
}

// validateBGP applies the defaults of [bgp] and checks it.
func (d *decoder) validateBGP() {
	b, raw := &d.cfg.BGP, d.bgpRaw
	if !b.Enabled {
		return
	}
	if !hasKey(raw, "listen_port") {
		b.ListenPort = DefaultBGPListenPort
	}
	if !hasKey(raw, "med_up") {
		b.MEDUp = DefaultBGPMEDUp
	}
	if !hasKey(raw, "med_degraded") {
		b.MEDDegraded = DefaultBGPMEDDegraded
	}
	if !hasKey(raw, "drain_delay") {
		b.DrainDelay.Duration = DefaultBGPDrainDelay
	}
	if !hasKey(raw, "drain_on_stop_delay") {
		b.DrainOnStopDelay.Duration = DefaultBGPDrainOnStopDelay
	}
	switch a, err := netip.ParseAddr(b.RouterID); {
	case b.RouterID == "":
		d.p.add("bgp.router_id", "", "missing: an IPv4 address such as the host's own is required")
	case err != nil || !a.Is4():
		d.p.add("bgp.router_id", b.RouterID, "must be an IPv4 address (the BGP identifier)")
	case a.IsUnspecified():
		d.p.add("bgp.router_id", b.RouterID, "must not be 0.0.0.0")
	default:
		b.RouterAddr = a
	}
	d.checkAS("bgp.local_as", b.LocalAS, hasKey(raw, "local_as"))
	if b.ListenPort != -1 && (b.ListenPort < 1 || b.ListenPort > 65535) {
		d.p.add("bgp.listen_port", strconv.Itoa(b.ListenPort), "must be between 1 and 65535, or -1 not to listen")
	}
	for _, m := range []struct {
		key string
		v   int
	}{{"med_up", b.MEDUp}, {"med_degraded", b.MEDDegraded}} {
		if m.v < 0 || m.v > math.MaxUint32 {
			d.p.add(joinKey("bgp", m.key), strconv.Itoa(m.v), "must be between 0 and 4294967295")
		}
	}
	if b.MEDDegraded <= b.MEDUp {
		d.p.add("bgp.med_degraded", strconv.Itoa(b.MEDDegraded), fmt.Sprintf("must be above med_up (%d): a degraded VIP is announced with the worse MED", b.MEDUp))
	}
	b.Up = d.communities("bgp.communities_up", b.CommunitiesUp)
	b.Degraded = d.communities("bgp.communities_degraded", b.CommunitiesDegraded)
	if v := b.DrainDelay.Duration; v < 0 || v > MaxBGPDrainDelay {
		d.p.add("bgp.drain_delay", fmtDur(v), "must be between 0s and "+fmtDur(MaxBGPDrainDelay))
	}
	if v := b.DrainOnStopDelay.Duration; v < time.Second || v > MaxBGPDrainOnStopDelay {
		d.p.add("bgp.drain_on_stop_delay", fmtDur(v), "must be between 1s and "+fmtDur(MaxBGPDrainOnStopDelay)+" (systemd's stop timeout allows for no more)")
	}
	switch m := b.MinAnnouncing; {
	case m < 0 || m > MaxBGPMinAnnouncing:
		d.p.add("bgp.min_announcing", strconv.Itoa(m), fmt.Sprintf("must be between 0 (off) and %d", MaxBGPMinAnnouncing))
	case m > 0 && d.cfg.Fleet == nil:
		d.p.add("bgp.min_announcing", strconv.Itoa(m), "needs [fleet]: the floor counts the other hosts of the fleet that announce a VIP")
	}
	if len(b.Peers) == 0 {
		d.p.add("bgp.peer", "", "missing: at least one [[bgp.peer]] is required")
	}
	peers, _ := tables(raw["peer"])
	seen := map[netip.Addr]int{}
	for i := range b.Peers {
		var pr map[string]any
		if i < len(peers) {
			pr = peers[i]
		}
		d.validateBGPPeer(i, pr, seen)
	}
}

// validateBGPPeer applies the defaults of [[bgp.peer]] number i (raw) and
// checks it.
func (d *decoder) validateBGPPeer(i int, raw map[string]any, seen map[netip.Addr]int) {
	p := &d.cfg.BGP.Peers[i]
	base := indexKey("bgp.peer", i)
	if !hasKey(raw, "port") {
		p.Port = DefaultBGPPeerPort
	}
	if !hasKey(raw, "hold_time") {
		p.HoldTime.Duration = DefaultBGPHoldTime
	}
	if !hasKey(raw, "keepalive") {
		p.Keepalive.Duration = (p.HoldTime.Duration / 3).Truncate(time.Second)
	}
	switch a, err := netip.ParseAddr(p.Address); {
	case p.Address == "":
		d.p.add(joinKey(base, "address"), "", "missing: the router's address is required")
	case err != nil:
		d.p.add(joinKey(base, "address"), p.Address, "not an IPv4 or IPv6 address")
	case a.Zone() != "":
		d.p.add(joinKey(base, "address"), p.Address, "an address with a zone cannot be used")
	case a.IsUnspecified() || a.IsMulticast():
		d.p.add(joinKey(base, "address"), p.Address, "must be a router's unicast address")
	default:
		a = a.Unmap()
		if j, dup := seen[a]; dup {
			d.p.add(joinKey(base, "address"), p.Address, fmt.Sprintf("listed twice (also %s)", indexKey("bgp.peer", j)))
			break
		}
		seen[a] = i
		p.Addr = a
	}
	d.checkAS(joinKey(base, "as"), p.AS, hasKey(raw, "as"))
	if p.Port < 1 || p.Port > 65535 {
		d.p.add(joinKey(base, "port"), strconv.Itoa(p.Port), "must be between 1 and 65535")
	}
	hold, ka := p.HoldTime.Duration, p.Keepalive.Duration
	holdOK := hold == 0 || (hold >= MinBGPHoldTime && hold <= MaxBGPHoldTime && hold%time.Second == 0)
	if !holdOK {
		d.p.add(joinKey(base, "hold_time"), fmtDur(hold), "must be 0s (no keepalives) or whole seconds between 3s and 65535s (RFC 4271)")
	}
	switch {
	case ka < 0 || ka%time.Second != 0:
		d.p.add(joinKey(base, "keepalive"), fmtDur(ka), "must be whole seconds")
	case hold == 0 && ka != 0:
		d.p.add(joinKey(base, "keepalive"), fmtDur(ka), "must be 0s when hold_time is 0s")
	case hold != 0 && holdOK && (ka < time.Second || ka >= hold):
		d.p.add(joinKey(base, "keepalive"), fmtDur(ka), "must be at least 1s and below hold_time ("+fmtDur(hold)+"); a third of it is usual")
	}
	if len(p.Password) > 80 {
		d.p.add(joinKey(base, "password"), "", "must be at most 80 bytes (the kernel's TCP MD5 key limit)")
	}
	if p.Multihop != 0 && (p.Multihop < 2 || p.Multihop > 255) {
		d.p.add(joinKey(base, "multihop"), strconv.Itoa(p.Multihop), "must be 0 (directly connected) or between 2 and 255")
	}
}

// checkAS checks an AS number at key.
func (d *decoder) checkAS(key string, as int, present bool) {
	switch {
	case !present:
		d.p.add(key, "", "missing: an AS number is required")
	case as < 1 || as > math.MaxUint32:
		d.p.add(key, strconv.Itoa(as), "must be between 1 and 4294967295")
	case as == asTrans:
		d.p.add(key, strconv.Itoa(as), "is AS_TRANS (RFC 6793), not a real AS number")
	}
}

// communities parses the list at key.
func (d *decoder) communities(key string, list []string) []Community {
	var out []Community
	for i, s := range list {
		c, err := ParseCommunity(s)
		switch {
		case err != nil:
			d.p.add(indexKey(key, i), s, `not a community: want ASN:VALUE such as "65001:100", both 0..65535`)
		case c == GracefulShutdown:
			d.p.add(indexKey(key, i), s, "is GRACEFUL_SHUTDOWN (RFC 8326), added only by lbctl host drain")
		default:
			out = append(out, c)
		}
	}
	return out
}
