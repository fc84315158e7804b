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
		gslbPools: make(map[string]int, len(c.GSLB.Pools)),
		services:  make(map[string]int, len(c.GSLB.Services)),
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
	for i := range c.GSLB.Pools {
		if _, dup := ix.gslbPools[c.GSLB.Pools[i].Name]; !dup {
			ix.gslbPools[c.GSLB.Pools[i].Name] = i
		}
	}
	for i := range c.GSLB.Services {
		if _, dup := ix.services[c.GSLB.Services[i].Name]; !dup {
			ix.services[c.GSLB.Services[i].Name] = i
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
	gslb := ""
	if n := len(c.GSLB.Pools); n > 0 {
		members := 0
		for _, p := range c.GSLB.Pools {
			members += len(p.Members)
		}
		gslb = fmt.Sprintf(", %s with %s", plural(n, "gslb pool"), plural(members, "member"))
	}
	return fmt.Sprintf("config ok: %s, %s, %s%s%s, %s",
		plural(len(c.VIPs), "vip"), plural(len(c.Pools), "pool"),
		plural(len(c.Resolvers), "resolver"), vendors, gslb, plural(len(c.Checks), "check"))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
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

// KeepRestartOnly keeps in c the keys that take effect only at a restart
// (daemon.state_dir, daemon.control_socket, daemon.status_listen,
// daemon.status_max_requests, daemon.status_max_connections,
// daemon.control_max_connections, daemon.reserved_fds, actions.nft_table, the whole [fleet] and
// [dnstap] tables) as the running configuration has them, and tells
// whether c had them different: the
// state in force lives in the directory (or the etcd store) it was loaded
// from, and the listeners stay where and as they are, until the daemon
// restarts.
func (c *Config) KeepRestartOnly(running *Config) (changed bool) {
	changed = c.Daemon.StateDir != running.Daemon.StateDir || c.Daemon.ControlSocket != running.Daemon.ControlSocket ||
		c.Daemon.StatusListen != running.Daemon.StatusListen || c.Daemon.StatusMaxRequests != running.Daemon.StatusMaxRequests ||
		c.Daemon.StatusMaxConnections != running.Daemon.StatusMaxConnections || c.Daemon.ControlMaxConnections != running.Daemon.ControlMaxConnections ||
		c.Daemon.ReservedFDs != running.Daemon.ReservedFDs ||
		!c.Fleet.Equal(running.Fleet) || !c.Dnstap.Equal(running.Dnstap) || c.Actions.NftTable != running.Actions.NftTable
	c.Actions.NftTable = running.Actions.NftTable
	c.Daemon.StateDir = running.Daemon.StateDir
	c.Daemon.ControlSocket = running.Daemon.ControlSocket
	c.Daemon.StatusListen = running.Daemon.StatusListen
	c.Daemon.StatusMaxRequests = running.Daemon.StatusMaxRequests
	c.Daemon.StatusMaxConnections = running.Daemon.StatusMaxConnections
	c.Daemon.ControlMaxConnections = running.Daemon.ControlMaxConnections
	c.Daemon.ReservedFDs = running.Daemon.ReservedFDs
	c.Fleet = running.Fleet
	c.Dnstap = running.Dnstap
	return changed
}
