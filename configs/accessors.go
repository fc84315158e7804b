package configs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Resolver returns the resolver named name, or nil.
func (c *Config) Resolver(name string) *Resolver {
	for i := range c.Resolvers {
		if c.Resolvers[i].Name == name {
			return &c.Resolvers[i]
		}
	}
	return nil
}

// Pool returns the pool named name, or nil.
func (c *Config) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// VIP returns the VIP named name, or nil.
func (c *Config) VIP(name string) *VIP {
	for i := range c.VIPs {
		if c.VIPs[i].Name == name {
			return &c.VIPs[i]
		}
	}
	return nil
}

// Check returns the check profile named name, or nil.
func (c *Config) Check(name string) *Check {
	return c.Checks[name]
}

// Summary describes the config in one line, for example
// "config ok: 2 vips, 2 pools, 7 resolvers (bind 2, unbound 2, knot 3), 1 check".
func (c *Config) Summary() string {
	count := map[string]int{}
	for _, r := range c.Resolvers {
		count[r.Vendor]++
	}
	var parts []string
	for _, v := range Vendors() {
		if n := count[v]; n > 0 {
			parts = append(parts, v+" "+strconv.Itoa(n))
		}
	}
	vendors := ""
	if len(parts) > 0 {
		vendors = " (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("config ok: %s, %s, %s%s, %s",
		plural(len(c.VIPs), "vip"), plural(len(c.Pools), "pool"),
		plural(len(c.Resolvers), "resolver"), vendors, plural(len(c.Checks), "check"))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// Key identifies the probe-relevant settings of a check: what is asked, how,
// and what counts as a pass (kind, qname, zone, qtype, qclass, rd, cd,
// transport, rcodes, expect, expect_regexp, timeout). Two checks with equal
// keys judge a target the same way, so a reload that keeps a target's key
// may keep its health state. Interval, rise, fall, identify and the name
// are left out: they change pacing and thresholds, not a probe's verdict.
func (c *Check) Key() string {
	rd := c.RD == nil || *c.RD
	return fmt.Sprintf("kind=%q qname=%q zone=%q qtype=%q qclass=%q rd=%t cd=%t transport=%q rcodes=%q expect=%q expect_regexp=%q timeout=%s",
		c.Kind, c.QName, c.Zone, c.QType, c.QClass, rd, c.CD, c.Transport,
		c.Rcodes, c.Expect, c.ExpectRegexp, c.Timeout.Duration)
}

// Equal reports whether c and o have the same settings in every field
// (the name included). Nil pointer bools compare as their defaults.
func (c *Check) Equal(o *Check) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Name == o.Name && c.Key() == o.Key() &&
		c.Interval == o.Interval && c.Rise == o.Rise && c.Fall == o.Fall &&
		boolOr(c.Identify, true) == boolOr(o.Identify, true)
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// Members returns the resolvers of pool p in member order (names that
// name no resolver are skipped).
func (c *Config) Members(p *Pool) []*Resolver {
	out := make([]*Resolver, 0, len(p.Members))
	for _, m := range p.Members {
		if r := c.Resolver(m); r != nil {
			out = append(out, r)
		}
	}
	return slices.Clip(out)
}
