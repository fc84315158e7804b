package configs

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Actions are the client actions' settings ([actions]): the limits on
// what lbctl block and lbctl limit may ask, the networks no action may
// touch, and the nftables table that enforces them. The table is
// optional; its defaults apply without it.
type Actions struct {
	// Enabled lets automatic actions (taken by the flood alarms on their
	// own) be taken. Operators' actions (lbctl block, limit) are always
	// available. Default false.
	Enabled bool `toml:"enabled"`
	// MaxEntries is the most client actions in force at once,
	// 1..65536. Default 1024.
	MaxEntries int `toml:"max_entries"`
	// Allow are addresses and prefixes no action may cover or fall in
	// (the fleet's nodes, monitoring hosts, the resolvers' upstream
	// forwarders). The back ends, the VIPs, the GSLB listen addresses
	// and members, the BGP routers and the etcd endpoints are protected
	// without being listed. Default none.
	Allow []string `toml:"allow"`
	// Shared are prefixes whose clients may be NAT gateways or shared
	// resolvers: a block there must be forced (lbctl block --force);
	// limit them instead. Default none.
	Shared []string `toml:"shared"`
	// DefaultLimitQPS is the rate of lbctl limit without --rate, in
	// packets per second per source address, 1..1000000. Default 50.
	DefaultLimitQPS int `toml:"default_limit_qps"`
	// NftTable is the name of lbdnsd's own nftables table (family
	// inet): letters, digits and '_', starting with a letter, at most 32.
	// Nothing else of the host's ruleset is touched. Default "lbdns".
	NftTable string `toml:"nft_table"`
	// AutoSharePercent is the share of a flood alarm's seconds that its
	// top client address (or, failing that, its top client prefix) must
	// hold for an automatic limit (Enabled), 1..100. It is apart from
	// [flood] share_percent: rate alarms name top clients too, and share
	// alarms may be off. Default 50.
	AutoSharePercent int `toml:"auto_share_percent"`
	// AutoFor is how long an automatic limit lasts before it ends on its
	// own, 1m..24h. Default 10m.
	AutoFor Duration `toml:"auto_for"`

	// AllowNets and SharedNets are Allow and Shared parsed (set by
	// Load; an address is its /32 or /128).
	AllowNets, SharedNets []netip.Prefix `toml:"-"`
}

// Defaults and limits of [actions].
const (
	DefaultActionsMaxEntries = 1024
	MaxActionsMaxEntries     = 65536
	DefaultActionsLimitQPS   = 50
	MaxActionsLimitQPS       = 1000000
	DefaultActionsNftTable   = "lbdns"
	DefaultActionsAutoShare  = 50
	DefaultActionsAutoFor    = 10 * time.Minute
	MinActionsAutoFor        = time.Minute
	MaxActionsAutoFor        = 24 * time.Hour
)

// decodeActions decodes [actions].
func (d *decoder) decodeActions(raw map[string]any) {
	d.actionsRaw, d.actionsOK = d.table("actions", raw, &d.cfg.Actions)
}

// validateActions applies the defaults of [actions] and checks it.
func (d *decoder) validateActions() {
	a, raw := &d.cfg.Actions, d.actionsRaw
	if !hasKey(raw, "max_entries") {
		a.MaxEntries = DefaultActionsMaxEntries
	}
	if !hasKey(raw, "default_limit_qps") {
		a.DefaultLimitQPS = DefaultActionsLimitQPS
	}
	if !hasKey(raw, "nft_table") {
		a.NftTable = DefaultActionsNftTable
	}
	if !hasKey(raw, "auto_share_percent") {
		a.AutoSharePercent = DefaultActionsAutoShare
	}
	if !hasKey(raw, "auto_for") {
		a.AutoFor.Duration = DefaultActionsAutoFor
	}
	if v := a.AutoSharePercent; v < 1 || v > 100 {
		d.p.add("actions.auto_share_percent", strconv.Itoa(v), "must be between 1 and 100")
	}
	if v := a.AutoFor.Duration; v < MinActionsAutoFor || v > MaxActionsAutoFor {
		d.p.add("actions.auto_for", fmtDur(v), fmt.Sprintf("must be between %s and %s", fmtDur(MinActionsAutoFor), fmtDur(MaxActionsAutoFor)))
	}
	if a.MaxEntries < 1 || a.MaxEntries > MaxActionsMaxEntries {
		d.p.add("actions.max_entries", strconv.Itoa(a.MaxEntries), "must be between 1 and "+strconv.Itoa(MaxActionsMaxEntries))
	}
	if a.DefaultLimitQPS < 1 || a.DefaultLimitQPS > MaxActionsLimitQPS {
		d.p.add("actions.default_limit_qps", strconv.Itoa(a.DefaultLimitQPS), "must be between 1 and "+strconv.Itoa(MaxActionsLimitQPS))
	}
	if !nftName(a.NftTable) {
		d.p.add("actions.nft_table", a.NftTable, "must be letters, digits and '_', starting with a letter, at most 32 characters")
	}
	a.AllowNets = d.prefixes("actions.allow", a.Allow)
	a.SharedNets = d.prefixes("actions.shared", a.Shared)
}

// prefixes parses a list of addresses and prefixes (no host bits).
func (d *decoder) prefixes(key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range list {
		p, err := ParseClient(s)
		if err != nil {
			d.p.add(indexKey(key, i), s, err.Error())
			continue
		}
		out = append(out, p)
	}
	return out
}

// ParseClient parses a client address ("192.0.2.7", "2001:db8::7": its
// /32 or /128) or prefix ("192.0.2.0/24", no host bits). An IPv4-mapped
// IPv6 address is its IPv4 address.
func ParseClient(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("an address with a zone is not a client")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an address or a prefix (such as 192.0.2.7, 192.0.2.0/24 or 2001:db8::/48)")
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		if p.Bits() < 0 {
			return netip.Prefix{}, errors.New("an IPv4-mapped prefix shorter than /96")
		}
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, errors.New("has host bits set (the network is " + m.String() + ")")
	}
	return p, nil
}

// nftName reports whether s is a table name lbdnsd writes.
func nftName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_'):
		default:
			return false
		}
	}
	return true
}
