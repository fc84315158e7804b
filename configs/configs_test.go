package configs

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden .err files in testdata")

// TestGolden parses every testdata/bad-*.toml and compares the error text
// with the matching .err file, one problem per line.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("found %d golden inputs, want at least 12", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(data, name)
			if err == nil {
				t.Fatalf("Parse succeeded (%s), want problems", cfg.Summary())
			}
			if cfg != nil {
				t.Errorf("Parse returned a config together with an error")
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".toml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("read golden (run go test ./configs -update to create it): %v", rerr)
			}
			if got != string(want) {
				t.Errorf("problems differ from %s\n--- got:\n%s--- want:\n%s", golden, got, want)
			}
			if n := len(Problems(err)); n != strings.Count(got, "\n") {
				t.Errorf("Problems returned %d problems, error text has %d lines", n, strings.Count(got, "\n"))
			}
		})
	}
}

// TestExamples loads every shipped example config.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example configs, want at least 3", len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			cfg, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Path != f {
				t.Errorf("Path = %q, want %q", cfg.Path, f)
			}
			assertLoaded(t, cfg)
		})
	}
}

// assertLoaded checks the promises Load makes about a returned Config.
func assertLoaded(t *testing.T, cfg *Config) {
	t.Helper()
	if cfg.IPVS.ExpireNodestConn == nil {
		t.Error("ipvs.expire_nodest_conn is nil")
	}
	for _, v := range cfg.VIPs {
		if !v.Addr.IsValid() {
			t.Errorf("vip %s: Addr not parsed", v.Name)
		}
		if cfg.Pool(v.Pool) == nil {
			t.Errorf("vip %s: pool %q not found", v.Name, v.Pool)
		}
	}
	for _, p := range cfg.Pools {
		if p.FailOpen == nil {
			t.Errorf("pool %s: FailOpen is nil", p.Name)
		}
		if len(cfg.Members(&p)) != len(p.Members) {
			t.Errorf("pool %s: members not all found", p.Name)
		}
	}
	for _, r := range cfg.Resolvers {
		if !r.AddrPort.IsValid() || r.AddrPort.Port() == 0 {
			t.Errorf("resolver %s: AddrPort %v not parsed", r.Name, r.AddrPort)
		}
	}
	for name, c := range cfg.Checks {
		if c.Name != name {
			t.Errorf("check %s: Name = %q", name, c.Name)
		}
		if c.Kind == "dns" && (c.DNS == nil || c.DNS.RD == nil || c.DNS.Identify == nil) {
			t.Errorf("check %s: dns settings or their pointer bools not set", name)
		}
		if c.Spec() == nil {
			t.Errorf("check %s: no settings of kind %q", name, c.Kind)
		}
	}
}

func TestQuickstartLoopbackOnly(t *testing.T) {
	cfg, err := Load("quickstart.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.VIPs[0].Addr.String(); got != "192.0.2.53" {
		t.Errorf("VIP = %s, want 192.0.2.53", got)
	}
	if cfg.Daemon.StateDir != "/tmp/lbdns-quickstart" {
		t.Errorf("state_dir = %q", cfg.Daemon.StateDir)
	}
	// The GSLB half too: the responder and every member on loopback.
	if len(cfg.GSLB.Server.ListenAddrs) == 0 || len(cfg.GSLB.Names) == 0 {
		t.Error("the quick start has no GSLB responder or names")
	}
	for _, a := range cfg.GSLB.Server.ListenAddrs {
		if !a.Addr().IsLoopback() {
			t.Errorf("gslb listen %v is not on loopback", a)
		}
	}
	for _, p := range cfg.GSLB.Pools {
		for _, m := range p.Members {
			if !m.Addr.IsLoopback() || !m.ProbeAddr.IsLoopback() {
				t.Errorf("gslb member %s/%s at %v is not on loopback", p.Name, m.Name, m.Addr)
			}
		}
	}
	vendors := map[string]bool{}
	for _, r := range cfg.Resolvers {
		if !r.AddrPort.Addr().IsLoopback() {
			t.Errorf("resolver %s at %v is not on loopback", r.Name, r.AddrPort)
		}
		if p := r.AddrPort.Port(); p < 5301 || p > 5305 {
			t.Errorf("resolver %s port %d outside 5301..5305", r.Name, p)
		}
		vendors[r.Vendor] = true
	}
	for _, v := range []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"} {
		if !vendors[v] {
			t.Errorf("no %s resolver", v)
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	chk := cfg.Check("recursive")
	tests := []struct {
		name      string
		got, want any
	}{
		{"daemon.state_dir", cfg.Daemon.StateDir, "/var/lib/lbdns"},
		{"daemon.log_level", cfg.Daemon.LogLevel, "info"},
		{"ipvs.resync_interval", cfg.IPVS.ResyncInterval.Duration, 30 * time.Second},
		{"ipvs.udp_timeout", cfg.IPVS.UDPTimeout.Duration, time.Duration(0)},
		{"ipvs.expire_nodest_conn", *cfg.IPVS.ExpireNodestConn, true},
		{"vip.ports", cfg.VIPs[0].Ports, []int{53}},
		{"vip.protocols", cfg.VIPs[0].Protocols, []string{"udp", "tcp"}},
		{"vip.scheduler", cfg.VIPs[0].Scheduler, "wrr"},
		{"vip.forwarding", cfg.VIPs[0].Forwarding, "dr"},
		{"pool.min_healthy", cfg.Pools[0].MinHealthy, 1},
		{"pool.fail_open", *cfg.Pools[0].FailOpen, true},
		{"pool.collapse_window", cfg.Pools[0].CollapseWindow.Duration, 9 * time.Second}, // (3+1) × 2s + 1s
		{"resolver.weight", cfg.Resolvers[0].Weight, 100},
		{"resolver.port", cfg.Resolvers[0].AddrPort.Port(), uint16(53)},
		{"check.kind", chk.Kind, "dns"},
		{"check.dns.zone fqdn", chk.DNS.Zone, "probe.example.net."},
		{"check.dns.qtype", chk.DNS.QType, "A"},
		{"check.dns.qclass", chk.DNS.QClass, "IN"},
		{"check.dns.rd", *chk.DNS.RD, true},
		{"check.dns.cd", chk.DNS.CD, false},
		{"check.dns.transport", chk.DNS.Transport, "udp"},
		{"check.dns.rcodes with zone", chk.DNS.Rcodes, []string{"NXDOMAIN"}},
		{"check.interval", chk.Interval.Duration, 2 * time.Second},
		{"check.timeout", chk.Timeout.Duration, time.Second},
		{"check.rise", chk.Rise, 2},
		{"check.fall", chk.Fall, 3},
		{"check.dns.identify", *chk.DNS.Identify, true},
		{"resolver.refresh bind", cfg.Resolvers[0].Refresh, "window"},
		{"resolver.refresh_window bind", cfg.Resolvers[0].RefreshWindow.Duration, 2 * time.Second},
		{"resolver.refresh unbound", cfg.Resolvers[1].Refresh, "expiry"},
		{"resolver.refresh_window_percent unbound", cfg.Resolvers[1].RefreshWindowPercent, 0},
		{"prefetch.max_qps", cfg.Prefetch.MaxQPS, 100},
		{"prefetch.jitter", cfg.Prefetch.Jitter.Duration, 100 * time.Millisecond},
		{"prefetch.timeout", cfg.Prefetch.Timeout.Duration, time.Second},
		{"prefetch.domain", len(cfg.Prefetch.Domains), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !equalAny(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []int:
		return slices.Equal(x, b.([]int))
	case []string:
		return slices.Equal(x, b.([]string))
	}
	return a == b
}

const okDoc = `
[[vip]]
name = "v"
address = "192.0.2.1"
pool = "p"

[[pool]]
name = "p"
members = ["a"]
check = "c"

[[resolver]]
name = "a"
address = "192.0.2.10"
vendor = "other"

[check.c.dns]
qname = "example.com"
`

func TestRcodesDefaultWithQName(t *testing.T) {
	cfg, err := Parse([]byte(okDoc), "ok.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Check("c").DNS
	if len(c.Rcodes) != 1 || c.Rcodes[0] != "NOERROR" {
		t.Errorf("rcodes = %q, want [NOERROR]", c.Rcodes)
	}
	if c.QName != "example.com." {
		t.Errorf("qname = %q, want it fully qualified", c.QName)
	}
}

// TestCollapseWindowDefault: collapse_window follows the pacing of the
// pool's check unless set; an explicit 0s (the last good set alone) is
// kept.
func TestCollapseWindowDefault(t *testing.T) {
	for _, tc := range []struct {
		name, pool, check string
		want              time.Duration
	}{
		{"default pacing", "", "", 9 * time.Second},
		{"check pacing", "", "interval = \"500ms\"\ntimeout = \"200ms\"\nfall = 2\n", 1700 * time.Millisecond},
		{"set", "collapse_window = \"30s\"\n", "fall = 2\n", 30 * time.Second},
		{"explicit zero", "collapse_window = \"0s\"\n", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(okDoc, `check = "c"`, `check = "c"`+"\n"+tc.pool, 1)
			doc = strings.Replace(doc, "[check.c.dns]", "[check.c]\n"+tc.check+"\n[check.c.dns]", 1)
			cfg, err := Parse([]byte(doc), "x.toml")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Pools[0].CollapseWindow.Duration; got != tc.want {
				t.Errorf("collapse_window = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestExplicitZeroIsNotDefaulted(t *testing.T) {
	tests := []struct {
		name, add, wantKey string
	}{
		{"weight", "weight = 0\n", "resolver[0].weight"},
		{"min_healthy", "", "pool[0].min_healthy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := okDoc
			switch tt.name {
			case "weight":
				doc = strings.Replace(doc, `vendor = "other"`, `vendor = "other"`+"\n"+tt.add, 1)
			case "min_healthy":
				doc = strings.Replace(doc, `check = "c"`, `check = "c"`+"\nmin_healthy = 0", 1)
			}
			_, err := Parse([]byte(doc), "x.toml")
			ps := Problems(err)
			if len(ps) != 1 || ps[0].Key != tt.wantKey || ps[0].Value != "0" {
				t.Fatalf("problems = %v, want one at %s with value 0", ps, tt.wantKey)
			}
		})
	}
}

func TestProblemFields(t *testing.T) {
	doc := strings.Replace(okDoc, `address = "192.0.2.10"`, `address = "192.0.2.999"`, 1)
	_, err := Parse([]byte(doc), "f.toml")
	ps := Problems(err)
	if len(ps) != 1 {
		t.Fatalf("got %d problems (%v), want 1", len(ps), err)
	}
	want := Problem{File: "f.toml", Line: 14, Key: "resolver[0].address", Value: "192.0.2.999", Msg: "not an IP address, IP:PORT or [IPv6]:PORT"}
	if ps[0] != want {
		t.Errorf("problem = %#v, want %#v", ps[0], want)
	}
	if got := ps[0].Error(); got != `f.toml:14: resolver[0].address: value "192.0.2.999": not an IP address, IP:PORT or [IPv6]:PORT` {
		t.Errorf("Error() = %s", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if Problems(err) != nil {
		t.Errorf("a read error should hold no Problem, got %v", Problems(err))
	}
	if !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestAccessors(t *testing.T) {
	cfg, err := Load("full.toml")
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Resolver("knot-6"); r == nil || r.AddrPort.String() != "[2001:db8:1::41]:53" {
		t.Errorf("Resolver(knot-6) = %+v", r)
	}
	if cfg.Resolver("nope") != nil || cfg.Pool("nope") != nil || cfg.VIP("nope") != nil || cfg.Check("nope") != nil {
		t.Error("lookup of a missing name returned non-nil")
	}
	if p := cfg.Pool("v6-mixed"); p == nil || len(p.Members) != 3 {
		t.Errorf("Pool(v6-mixed) = %+v", p)
	}
	want := "config ok: 2 vips, 2 pools, 9 resolvers (bind 2, unbound 3, powerdns 1, knot 2, dnsmasq 1), 1 gslb pool with 2 members, 3 checks"
	if got := cfg.Summary(); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	min, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := min.Summary(), "config ok: 1 vip, 1 pool, 2 resolvers (bind 1, unbound 1), 1 check"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// TestProbeIdentity: a reload keeps a target's health exactly when the
// probe's identity is unchanged; pacing and identify do not change it,
// every setting of the question and of the judgement does.
func TestProbeIdentity(t *testing.T) {
	base := func() *Check {
		cfg, err := Parse([]byte(okDoc), "k.toml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Check("c")
	}
	tests := []struct {
		name      string
		change    func(c *Check)
		sameProbe bool
	}{
		{"unchanged", func(*Check) {}, true},
		{"interval", func(c *Check) { c.Interval.Duration = 5 * time.Second }, true},
		{"rise", func(c *Check) { c.Rise = 5 }, true},
		{"identify", func(c *Check) { f := false; c.DNS.Identify = &f }, true},
		{"kind", func(c *Check) { c.Kind = "other" }, false},
		{"qname", func(c *Check) { c.DNS.QName = "example.org." }, false},
		{"qtype", func(c *Check) { c.DNS.QType = "AAAA" }, false},
		{"rd", func(c *Check) { f := false; c.DNS.RD = &f }, false},
		{"cd", func(c *Check) { c.DNS.CD = true }, false},
		{"transport", func(c *Check) { c.DNS.Transport = "tcp" }, false},
		{"rcodes", func(c *Check) { c.DNS.Rcodes = []string{"NOERROR", "NXDOMAIN"} }, false},
		{"expect", func(c *Check) { c.DNS.Expect = "192.0.2.1" }, false},
		{"timeout", func(c *Check) { c.Timeout.Duration = 500 * time.Millisecond }, true},
		{"fast_interval", func(c *Check) { c.FastInterval.Duration = 100 * time.Millisecond }, true},
		{"rd true by another pointer", func(c *Check) { tr := true; c.DNS.RD = &tr }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(b)
			if got := a.ProbeIdentity() == b.ProbeIdentity(); got != tt.sameProbe {
				t.Errorf("same identity = %v, want %v (%s vs %s)", got, tt.sameProbe, a.ProbeIdentity(), b.ProbeIdentity())
			}
		})
	}
	var nilCheck *Check
	if nilCheck.ProbeIdentity() == base().ProbeIdentity() {
		t.Error("a nil check has the identity of a real one")
	}
}

// TestProbeIdentityEveryField sets each field of DNSCheck in turn: each
// one except those tagged json:"-" (identify) changes the identity, with
// no list of fields anywhere.
func TestProbeIdentityEveryField(t *testing.T) {
	typ := reflect.TypeFor[DNSCheck]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			var a, b DNSCheck
			v := reflect.ValueOf(&b).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString("x")
			case reflect.Bool:
				v.SetBool(true)
			case reflect.Pointer:
				v.Set(reflect.New(f.Type.Elem()))
			case reflect.Slice:
				v.Set(reflect.MakeSlice(f.Type, 1, 1))
			default:
				t.Fatalf("field kind %s: extend this test", v.Kind())
			}
			want := f.Tag.Get("json") != "-"
			if got := SpecIdentity(&a) != SpecIdentity(&b); got != want {
				t.Errorf("identity changed = %v, want %v", got, want)
			}
		})
	}
}

// TestSpecIdentityNewField: a spec type of a future kind, extended by a
// field, is compared by that field too with no other edit.
func TestSpecIdentityNewField(t *testing.T) {
	type httpSpec struct {
		URL string
	}
	type httpSpecV2 struct {
		URL string
		// ValidStatus is the added field.
		ValidStatus []int
	}
	if SpecIdentity(httpSpec{URL: "http://x/"}) != SpecIdentity(httpSpec{URL: "http://x/"}) {
		t.Fatal("equal specs differ")
	}
	a := httpSpecV2{URL: "http://x/", ValidStatus: []int{200}}
	b := httpSpecV2{URL: "http://x/", ValidStatus: []int{200, 204}}
	if SpecIdentity(a) == SpecIdentity(b) {
		t.Error("the added field does not change the identity")
	}
	if SpecIdentity(a) != SpecIdentity(httpSpecV2{URL: "http://x/", ValidStatus: []int{200}}) {
		t.Error("equal values, different identities")
	}
}

func TestLineIndex(t *testing.T) {
	doc := `# comment
[daemon]
log_level = "info" # [not.a.header]

[[resolver]]
name = "a"
note = """
[[resolver]]
name = "fake"
"""

[[resolver]]
name = 'b'
"quoted.key" = 1
list = [
  "x", # ]
  "y",
]
after = 2
inline = { k = 1 }

[check.c]
sub.deep = 3
[check."odd name"]
qname = "x"
`
	idx := scanLines([]byte(doc))
	tests := []struct {
		path string
		want int
	}{
		{"daemon", 2},
		{"daemon.log_level", 3},
		{"resolver[0]", 5},
		{"resolver[0].name", 6},
		{"resolver[0].note", 7},
		{"resolver[1]", 12},
		{"resolver[1].name", 13},
		{`resolver[1]."quoted.key"`, 14},
		{"resolver[1].list", 15},
		{"resolver[1].list[1]", 15},
		{"resolver[1].after", 19},
		{"resolver[1].inline.k", 20},
		{"resolver[2]", 0},
		{"check.c", 22},
		{"check.c.sub", 23},
		{"check.c.sub.deep", 23},
		{`check."odd name".qname`, 25},
		{"nothing", 0},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := idx.lineOf(tt.path); got != tt.want {
				t.Errorf("lineOf(%q) = %d, want %d", tt.path, got, tt.want)
			}
		})
	}
}

func TestVendorsAndSchedulersFresh(t *testing.T) {
	v := Vendors()
	v[0] = "changed"
	if Vendors()[0] != "bind" {
		t.Error("Vendors shares its slice with callers")
	}
	if len(Schedulers()) != 14 {
		t.Errorf("Schedulers() has %d entries, want 14", len(Schedulers()))
	}
}

func TestAccessorsIndexed(t *testing.T) {
	var b strings.Builder
	b.WriteString("[[vip]]\nname = \"v\"\naddress = \"192.0.2.53\"\npool = \"p\"\n\n[[pool]]\nname = \"p\"\ncheck = \"c\"\nmembers = [")
	const n = 3000
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "\"r%d\"", i)
	}
	b.WriteString("]\n\n")
	for i := range n {
		fmt.Fprintf(&b, "[[resolver]]\nname = \"r%d\"\naddress = \"198.51.%d.%d\"\nvendor = \"bind\"\n\n", i, 100+i/250, i%250+1)
	}
	b.WriteString("[check.c.dns]\nzone = \"probe.example.net\"\n")
	cfg, err := Parse([]byte(b.String()), "big.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 1234, n - 1} {
		name := fmt.Sprintf("r%d", i)
		if r := cfg.Resolver(name); r == nil || r.Name != name {
			t.Fatalf("Resolver(%q) = %v", name, r)
		}
	}
	if cfg.Resolver("nope") != nil || cfg.Pool("p") == nil || cfg.VIP("v") == nil {
		t.Fatal("wrong accessor answers")
	}
	// A config changed by hand after Parse still answers correctly.
	cfg.Resolvers[0], cfg.Resolvers[1] = cfg.Resolvers[1], cfg.Resolvers[0]
	if r := cfg.Resolver("r0"); r == nil || r.Name != "r0" {
		t.Fatalf("after reorder Resolver(r0) = %v", r)
	}
	if got := len(cfg.Members(cfg.Pool("p"))); got != n {
		t.Fatalf("Members = %d, want %d", got, n)
	}
}

func TestCheckKinds(t *testing.T) {
	if got := CheckKinds(); len(got) == 0 || got[0] != "dns" || !slices.Contains(got, "icmp") || !slices.Contains(got, "tcp") ||
		!slices.Contains(got, "udp") || !slices.Contains(got, "http") || !slices.Contains(got, "https") {
		t.Errorf("CheckKinds() = %q, want dns first, icmp, tcp, udp, http and https among them", got)
	}
	cfg, err := Parse([]byte(okDoc), "k.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Check("c")
	if s, ok := c.Spec().(*DNSCheck); !ok || s != c.DNS {
		t.Errorf("Spec() = %#v, want the *DNSCheck", c.Spec())
	}
	other := *c
	other.Kind = "smtp"
	if other.Spec() != nil {
		t.Errorf("Spec() of an unknown kind = %#v, want nil", other.Spec())
	}
}

// TestMovedKeys: the flat layout from before checks had kinds is refused
// with where each key went, and nothing else about that check.
func TestMovedKeys(t *testing.T) {
	doc := strings.Replace(okDoc, "[check.c.dns]\n", "[check.c]\n", 1)
	_, err := Parse([]byte(doc), "m.toml")
	ps := Problems(err)
	want := Problem{File: "m.toml", Line: 18, Key: "check.c.qname", Value: "example.com",
		Msg: "moved to [check.c.dns]: write qname = ... under that header"}
	if len(ps) != 1 || ps[0] != want {
		t.Fatalf("problems = %#v, want %#v", ps, want)
	}
}

// TestKeepRestartOnly: a reloaded config keeps the running state_dir,
// control_socket and status_listen, says when it had them different, and
// keeps every other key of its own.
func TestKeepRestartOnly(t *testing.T) {
	load := func() *Config {
		t.Helper()
		c, err := Load("minimal.toml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	running := load()
	running.Daemon.StateDir, running.Daemon.ControlSocket, running.Daemon.StatusListen = "/run/a", "/run/a.sock", "127.0.0.1:1"

	same := load()
	same.Daemon.StateDir, same.Daemon.ControlSocket, same.Daemon.StatusListen = "/run/a", "/run/a.sock", "127.0.0.1:1"
	if same.KeepRestartOnly(running) {
		t.Error("KeepRestartOnly of an unchanged config = true")
	}
	for _, tc := range []struct {
		name string
		set  func(d *Daemon)
	}{
		{"state_dir", func(d *Daemon) { d.StateDir = "/run/b" }},
		{"control_socket", func(d *Daemon) { d.ControlSocket = "/run/b.sock" }},
		{"status_listen", func(d *Daemon) { d.StatusListen = "" }},
		{"status_max_requests", func(d *Daemon) { d.StatusMaxRequests = 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := *same
			next.Daemon.LogLevel = "debug"
			tc.set(&next.Daemon)
			if !next.KeepRestartOnly(running) {
				t.Error("KeepRestartOnly = false, want true")
			}
			if next.Daemon.StateDir != "/run/a" || next.Daemon.ControlSocket != "/run/a.sock" || next.Daemon.StatusListen != "127.0.0.1:1" ||
				next.Daemon.StatusMaxRequests != running.Daemon.StatusMaxRequests {
				t.Errorf("restart-only keys after KeepRestartOnly: %+v", next.Daemon)
			}
			if next.Daemon.LogLevel != "debug" {
				t.Errorf("log_level = %q, want the new config's", next.Daemon.LogLevel)
			}
		})
	}
}

// TestExamplesCoverEveryKind: the shipped example configs use a check of
// every kind, each in a check profile a pool or a GSLB member is probed
// with, so every kind's shipped example is loaded and validated.
func TestExamplesCoverEveryKind(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string][]string{}
	for _, f := range files {
		cfg, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names := map[string]bool{}
		for _, p := range cfg.Pools {
			names[p.Check] = true
		}
		for _, p := range cfg.GSLB.Pools {
			for _, n := range p.Monitors {
				names[n] = true
			}
			for _, m := range p.Members {
				for _, n := range m.Monitors {
					names[n] = true
				}
			}
		}
		for n := range names {
			if c := cfg.Checks[n]; c != nil {
				used[c.Kind] = append(used[c.Kind], f)
			}
		}
	}
	for _, k := range CheckKinds() {
		if len(used[k]) == 0 {
			t.Errorf("no shipped example config (configs/*.toml) probes anything with a check of kind %q", k)
		}
	}
}

func TestActionsDefaults(t *testing.T) {
	full, err := Load("full.toml")
	if err != nil {
		t.Fatal(err)
	}
	a := full.Actions
	if a.Enabled || a.MaxEntries != 1024 || a.DefaultLimitQPS != 50 || a.NftTable != "lbdns" ||
		a.AutoSharePercent != 50 || a.AutoFor.Duration != 10*time.Minute || fmt.Sprint(a.AllowNets) != "[192.0.2.0/28]" || fmt.Sprint(a.SharedNets) != "[100.64.0.0/10]" {
		t.Errorf("full.toml [actions] = %+v", a)
	}
	min, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if a := min.Actions; a.Enabled || a.MaxEntries != DefaultActionsMaxEntries || a.DefaultLimitQPS != DefaultActionsLimitQPS || a.NftTable != DefaultActionsNftTable || len(a.AllowNets) != 0 ||
		a.AutoSharePercent != DefaultActionsAutoShare || a.AutoFor.Duration != DefaultActionsAutoFor {
		t.Errorf("defaults without [actions] = %+v", a)
	}
}
