package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lbdns/internal/lab/dnstest"
)

// world is one test's installation: a loopback DNS server per back-end
// resolver, a configuration file, a state directory and a control socket,
// and the lbdnsd processes started over them.
type world struct {
	t        *testing.T
	dir      string
	cfgPath  string
	stateDir string
	socket   string
	backends map[string]*dnstest.Server
	layout   layout
}

// layout is what the configuration file says.
type layout struct {
	pools     []poolSpec
	resolvers []resolverSpec
	// daemonExtra is added to the [daemon] table (a bad key, say).
	daemonExtra string
}

// poolSpec is one pool and the VIP in front of it.
type poolSpec struct {
	name    string
	vip     string
	vipAddr string
	members []string
}

// resolverSpec is one back-end resolver.
type resolverSpec struct {
	name   string
	vendor string
	weight int
	// address, when set, replaces the back end's loopback address (a bad
	// one, say).
	address string
}

// vendorFor is the vendor of the i-th resolver (0-based): the products
// in turn.
func vendorFor(i int) string {
	vendors := [...]string{"bind", "unbound", "knot", "powerdns", "dnsmasq"}
	return vendors[i%len(vendors)]
}

// resolverNames returns r1 … rN.
func resolverNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%d", i+1)
	}
	return out
}

// onePool is a layout of n resolvers r1 … rN in pool "main" behind VIP
// "v4"; resolver ri has weight 10·i.
func onePool(n int) layout {
	names := resolverNames(n)
	l := layout{pools: []poolSpec{{name: "main", vip: "v4", vipAddr: "192.0.2.53", members: names}}}
	for i, name := range names {
		l.resolvers = append(l.resolvers, resolverSpec{name: name, vendor: vendorFor(i), weight: 10 * (i + 1)})
	}
	return l
}

// twoPools is onePool(6) with r5 and r6 moved to pool "other" behind VIP
// "v4b".
func twoPools() layout {
	l := onePool(6)
	l.pools = []poolSpec{
		{name: "main", vip: "v4", vipAddr: "192.0.2.53", members: []string{"r1", "r2", "r3", "r4"}},
		{name: "other", vip: "v4b", vipAddr: "192.0.2.54", members: []string{"r5", "r6"}},
	}
	return l
}

// without returns l with resolver name removed from the resolvers and
// from every pool.
func (l layout) without(name string) layout {
	out := layout{daemonExtra: l.daemonExtra}
	for _, r := range l.resolvers {
		if r.name != name {
			out.resolvers = append(out.resolvers, r)
		}
	}
	for _, p := range l.pools {
		p.members = slices.DeleteFunc(slices.Clone(p.members), func(m string) bool { return m == name })
		out.pools = append(out.pools, p)
	}
	return out
}

// resolver returns the spec of the resolver called name.
func (l layout) resolver(name string) resolverSpec {
	for _, r := range l.resolvers {
		if r.name == name {
			return r
		}
	}
	panic("e2e: no resolver " + name + " in the layout")
}

// newWorld starts a back end for every resolver of l and writes the
// configuration file in a new temporary directory.
func newWorld(t *testing.T, l layout) *world {
	t.Helper()
	return newWorldIn(t, t.TempDir(), l)
}

// newWorldIn is newWorld in dir. The control socket is dir/run/lbdns.sock,
// so that the daemon creates its directory.
func newWorldIn(t *testing.T, dir string, l layout) *world {
	t.Helper()
	w := &world{
		t:        t,
		dir:      dir,
		cfgPath:  filepath.Join(dir, "lbdns.toml"),
		stateDir: filepath.Join(dir, "state"),
		socket:   filepath.Join(dir, "run", "lbdns.sock"),
		backends: map[string]*dnstest.Server{},
	}
	for _, r := range l.resolvers {
		w.backend(r.name)
	}
	w.write(l)
	return w
}

// backend returns the loopback DNS server of resolver name, starting it
// the first time.
func (w *world) backend(name string) *dnstest.Server {
	if s, ok := w.backends[name]; ok {
		return s
	}
	s := dnstest.NewServer(w.t)
	w.backends[name] = s
	return s
}

// addr is the address of resolver name's back end, as the configuration
// and the IPVS table give it.
func (w *world) addr(name string) string { return w.backend(name).Addr().String() }

// write makes l the content of the configuration file.
func (w *world) write(l layout) {
	w.t.Helper()
	w.layout = l
	if err := os.WriteFile(w.cfgPath, []byte(w.render(l)), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// render returns the configuration file of l: dry-run friendly NAT VIPs,
// a check that asks a fresh name under the back ends' zone (they answer
// NXDOMAIN), probing every 200ms.
func (w *world) render(l layout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n", w.stateDir, w.socket)
	if l.daemonExtra != "" {
		fmt.Fprintf(&b, "%s\n", l.daemonExtra)
	}
	fmt.Fprintf(&b, "\n[ipvs]\nresync_interval = \"1s\"\n")
	for _, p := range l.pools {
		fmt.Fprintf(&b, "\n[[vip]]\nname = %q\naddress = %q\nforwarding = \"nat\"\npool = %q\n", p.vip, p.vipAddr, p.name)
	}
	for _, p := range l.pools {
		quoted := make([]string, len(p.members))
		for i, m := range p.members {
			quoted[i] = fmt.Sprintf("%q", m)
		}
		fmt.Fprintf(&b, "\n[[pool]]\nname = %q\nmembers = [%s]\ncheck = \"rec\"\n", p.name, strings.Join(quoted, ", "))
	}
	for _, r := range l.resolvers {
		addr := r.address
		if addr == "" {
			addr = w.addr(r.name)
		}
		fmt.Fprintf(&b, "\n[[resolver]]\nname = %q\naddress = %q\nvendor = %q\nweight = %d\n", r.name, addr, r.vendor, r.weight)
	}
	fmt.Fprintf(&b, "\n[check.rec]\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n\n[check.rec.dns]\nzone = %q\nidentify = false\n",
		strings.TrimSuffix(dnstest.DefaultZone, "."))
	return b.String()
}

// lineOf returns the 1-based number of the configuration file's first line
// that contains s.
func (w *world) lineOf(s string) int {
	w.t.Helper()
	b, err := os.ReadFile(w.cfgPath)
	if err != nil {
		w.t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	w.t.Fatalf("no line with %q in %s", s, w.cfgPath)
	return 0
}
