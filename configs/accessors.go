package configs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Resolver returns the resolver named name, or nil.
func (c *Config) Resolver(name string) *Resolver {
	var idx map[string]int
	if c.index != nil {
		idx = c.index.resolvers
	}
	return lookup(c.Resolvers, idx, name, func(r *Resolver) string { return r.Name })
}

// Pool returns the pool named name, or nil.
func (c *Config) Pool(name string) *Pool {
	var idx map[string]int
	if c.index != nil {
		idx = c.index.pools
	}
	return lookup(c.Pools, idx, name, func(p *Pool) string { return p.Name })
}

// VIP returns the VIP named name, or nil.
func (c *Config) VIP(name string) *VIP {
	var idx map[string]int
	if c.index != nil {
		idx = c.index.vips
	}
	return lookup(c.VIPs, idx, name, func(v *VIP) string { return v.Name })
}

// lookup finds the first element of list named name, through idx when it
// has a correct entry, else by a scan.
func lookup[T any](list []T, idx map[string]int, name string, nameOf func(*T) string) *T {
	if i, ok := idx[name]; ok && i < len(list) && nameOf(&list[i]) == name {
		return &list[i]
	}
	for i := range list {
		if nameOf(&list[i]) == name {
			return &list[i]
		}
	}
	return nil
}

// buildIndex indexes resolvers, pools and VIPs by name (the first of
// duplicate names, as the scan would find).
func (c *Config) buildIndex() {
	ix := &index{
		resolvers: make(map[string]int, len(c.Resolvers)),
		pools:     make(map[string]int, len(c.Pools)),
		vips:      make(map[string]int, len(c.VIPs)),
	}
	for i := range c.Resolvers {
		if _, dup := ix.resolvers[c.Resolvers[i].Name]; !dup {
			ix.resolvers[c.Resolvers[i].Name] = i
		}
	}
	for i := range c.Pools {
		if _, dup := ix.pools[c.Pools[i].Name]; !dup {
			ix.pools[c.Pools[i].Name] = i
		}
	}
	for i := range c.VIPs {
		if _, dup := ix.vips[c.VIPs[i].Name]; !dup {
			ix.vips[c.VIPs[i].Name] = i
		}
	}
	c.index = ix
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

// SameProbe reports whether c and o ask the same question and judge the
// answer the same way (name, kind, qname, zone, qtype, qclass, rd, cd,
// transport, rcodes, expect, expect_regexp), whatever their pacing
// (interval, fast_interval, timeout, rise, fall, identify): the health
// facts gathered under one still hold under the other, so a reload keeps
// them. Nil pointer bools compare as their defaults.
func (c *Check) SameProbe(o *Check) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Name == o.Name && c.Kind == o.Kind && c.QName == o.QName && c.Zone == o.Zone &&
		c.QType == o.QType && c.QClass == o.QClass && boolOr(c.RD, true) == boolOr(o.RD, true) &&
		c.CD == o.CD && c.Transport == o.Transport && slices.Equal(c.Rcodes, o.Rcodes) &&
		c.Expect == o.Expect && c.ExpectRegexp == o.ExpectRegexp
}

// Equal reports whether c and o have the same settings in every field.
func (c *Check) Equal(o *Check) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SameProbe(o) && c.Interval == o.Interval && c.FastInterval == o.FastInterval &&
		c.Timeout == o.Timeout && c.Rise == o.Rise && c.Fall == o.Fall &&
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
