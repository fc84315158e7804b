package configs

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// GSLBTopology is the GSLB responder's network map ([gslb.topology]):
// prefixes of location labels, from prefix-list files, inline nets and
// optionally a MaxMind-format database. Loaded by gslb/topology.
type GSLBTopology struct {
	// Levels are the location levels: the label keys that labels give
	// and policies match on. Default DefaultTopologyLevels.
	Levels []string `toml:"levels"`
	// MaxMindDB is the path of a MaxMind-format database whose country
	// and first subdivision ISO codes become the labels of the levels
	// "country" and "province"; "" for none. Relative paths are taken
	// from the config file's directory.
	MaxMindDB string `toml:"maxmind_db"`
	// Files are the prefix lists ([[gslb.topology.file]]).
	Files []GSLBTopologyFile `toml:"file"`
	// Nets are the inline prefixes ([[gslb.topology.net]]).
	Nets []GSLBTopologyNet `toml:"net"`
}

// GSLBTopologyFile is one prefix list ([[gslb.topology.file]]): a file of
// one CIDR prefix (or address) per line, '#' comments and blank lines,
// every prefix with the same labels.
type GSLBTopologyFile struct {
	// Path of the list; relative paths are taken from the config file's
	// directory. Required.
	Path string `toml:"path"`
	// Labels by level, applied to every prefix of the file. At least one.
	Labels map[string]string `toml:"labels"`
}

// GSLBTopologyNet is one inline prefix of the map ([[gslb.topology.net]]).
type GSLBTopologyNet struct {
	// Prefix is the CIDR prefix, IPv4 or IPv6, no host bits. Required.
	Prefix string `toml:"prefix"`
	// Labels by level. At least one.
	Labels map[string]string `toml:"labels"`

	// Net is Prefix parsed (set by Load).
	Net netip.Prefix `toml:"-"`
}

// DefaultTopologyLevels returns the default location levels.
func DefaultTopologyLevels() []string {
	return []string{"carrier", "country", "region", "province"}
}

// MaxMind levels: the MaxMind database fills these levels when configured.
const (
	LevelCountry  = "country"
	LevelProvince = "province"
)

// TopologyPath returns path (a topology file or database) resolved
// against the directory of the config file c was loaded from.
func (c *Config) TopologyPath(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(filepath.Dir(c.Path), path)
}

// gslbRawTopology returns the generic [gslb.topology] table.
func (d *decoder) gslbRawTopology() map[string]any {
	m, _ := d.gslbRaw["topology"].(map[string]any)
	return m
}

// decodeGSLBTopology applies the defaults of [gslb.topology].
func (d *decoder) decodeGSLBTopology() {
	if !hasKey(d.gslbRawTopology(), "levels") {
		d.cfg.GSLB.Topology.Levels = DefaultTopologyLevels()
	}
}

// validateGSLBTopology checks [gslb.topology].
func (d *decoder) validateGSLBTopology() {
	t := &d.cfg.GSLB.Topology
	raw := d.gslbRawTopology()
	const base = "gslb.topology"
	if len(t.Levels) == 0 {
		d.p.add(joinKey(base, "levels"), "", "must name at least one level")
	}
	for i, l := range t.Levels {
		k := indexKey(joinKey(base, "levels"), i)
		switch {
		case !validName(l):
			d.p.add(k, l, "bad level name (1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit)")
		case slices.Index(t.Levels, l) < i:
			d.p.add(k, l, "listed twice")
		}
	}
	if hasKey(raw, "maxmind_db") {
		switch {
		case t.MaxMindDB == "":
			d.p.add(joinKey(base, "maxmind_db"), "", `must not be empty (leave the key out for no database)`)
		case !slices.Contains(t.Levels, LevelCountry) && !slices.Contains(t.Levels, LevelProvince):
			d.p.add(joinKey(base, "maxmind_db"), t.MaxMindDB, fmt.Sprintf("the database gives the levels %q and %q, and levels has neither", LevelCountry, LevelProvince))
		}
	}
	fraw, _ := tables(raw["file"])
	for i := range t.Files {
		f := &t.Files[i]
		k := indexKey(joinKey(base, "file"), i)
		var fm map[string]any
		if i < len(fraw) {
			fm = fraw[i]
		}
		if !hasKey(fm, "path") {
			d.p.add(joinKey(k, "path"), "", "missing required key")
		} else if f.Path == "" {
			d.p.add(joinKey(k, "path"), "", "must not be empty")
		}
		d.checkTopologyLabels(joinKey(k, "labels"), f.Labels, hasKey(fm, "labels"))
	}
	nraw, _ := tables(raw["net"])
	first := map[netip.Prefix]int{}
	for i := range t.Nets {
		n := &t.Nets[i]
		k := indexKey(joinKey(base, "net"), i)
		var nm map[string]any
		if i < len(nraw) {
			nm = nraw[i]
		}
		pk := joinKey(k, "prefix")
		if !hasKey(nm, "prefix") {
			d.p.add(pk, "", "missing required key")
		} else if p, why := parseTopologyPrefix(n.Prefix); why != "" {
			d.p.add(pk, n.Prefix, why)
		} else if j, dup := first[p]; dup {
			o := indexKey(joinKey(base, "net"), j)
			d.p.add(pk, n.Prefix, fmt.Sprintf("duplicate prefix (also %s, line %d)", o, d.p.lineOf(o)))
		} else {
			n.Net = p
			first[p] = i
		}
		d.checkTopologyLabels(joinKey(k, "labels"), n.Labels, hasKey(nm, "labels"))
	}
}

// checkTopologyLabels checks the labels of a topology file or net at key.
func (d *decoder) checkTopologyLabels(key string, labels map[string]string, present bool) {
	levels := d.cfg.GSLB.Topology.Levels
	if !present || len(labels) == 0 {
		d.p.add(key, "", "must give at least one label, such as { "+levelExample(levels)+" }")
		return
	}
	for _, l := range sortedKeys(labels) {
		v := labels[l]
		switch {
		case !slices.Contains(levels, l):
			d.p.add(joinKey(key, l), v, "unknown level (levels: "+listText(levels)+")"+Suggest(l, levels))
		case v == "":
			d.p.add(joinKey(key, l), "", "must not be empty")
		case strings.ContainsAny(v, " \t\r\n"):
			d.p.add(joinKey(key, l), v, "must not contain white space")
		}
	}
}

// levelExample is an example label for messages.
func levelExample(levels []string) string {
	if len(levels) == 0 {
		return `country = "cn"`
	}
	return levels[0] + ` = "..."`
}

// parseTopologyPrefix parses a net's prefix: CIDR, no host bits, no
// zone; an IPv4-mapped IPv6 prefix of /96 or longer is taken as IPv4.
// It returns the prefix or why it is not usable.
func parseTopologyPrefix(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, "not a prefix (want ADDRESS/LENGTH such as 192.0.2.0/24 or 2001:db8::/32)"
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return p, "an IPv4-mapped prefix shorter than /96 cannot be used; write it as IPv4"
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if p.Masked() != p {
		return p, fmt.Sprintf("host bits set (the network is %s)", p.Masked())
	}
	return p, ""
}
