package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameAsWhole fails t unless data parses to the same Config (or the same
// error) with the [[gslb.name]] tables decoded apart and without.
func sameAsWhole(t *testing.T, data []byte, name string) {
	t.Helper()
	split, serr := parse(data, name, true)
	whole, werr := parse(data, name, false)
	if fmt.Sprint(serr) != fmt.Sprint(werr) {
		t.Fatalf("%s: names apart:\n%v\nwhole document:\n%v", name, serr, werr)
	}
	if !reflect.DeepEqual(split, whole) {
		t.Fatalf("%s: names apart and the whole document give different configs:\n%+v\n%+v", name, split.GSLB, whole.GSLB)
	}
}

// splitBase is a sound document with names (testdata/gslb-names.toml)
// before its names.
const splitBase = `[check.soa.dns]
qname = "example.com"

[gslb]
whoami = "whoami.gslb.example.com"

[[gslb.pool]]
name     = "north"
monitors = ["soa"]
fallback = "south"

[[gslb.pool.member]]
name    = "n1"
address = "192.0.2.1"

[[gslb.pool]]
name     = "south"
monitors = ["soa"]

[[gslb.pool.member]]
name    = "s1"
address = "198.51.100.1"

[[gslb.zone]]
name = "gslb.example.com"
ns   = ["ns1.example.com."]
`

// splitName is a [[gslb.name]] table with policies, named NAME.
const splitName = `
[[gslb.name]]
name = "NAME.gslb.example.com"
ecs  = true

[[gslb.name.policy]]
match = { carrier = "cmcc", province = "gd" }
pool  = "north"

[[gslb.name.policy]]
pool = "south"
`

// namesDoc is splitName once per name.
func namesDoc(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(strings.ReplaceAll(splitName, "NAME", n))
	}
	return b.String()
}

// TestSplitAsWhole: with its [[gslb.name]] tables decoded apart a
// document gives what the whole document's decode gives: the same
// Config, or the same problems (text, key, value, line) in the same
// order. Every fixture, and documents at the edges of the cut: names
// between other tables, sub-tables, names written as keys, bad values
// and syntax in a name, chunks of many names, no final line end, a byte
// order mark, CRLF, quoted and spaced headers.
func TestSplitAsWhole(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(f, func(t *testing.T) { sameAsWhole(t, data, f) })
	}
	var many []string
	for i := range 3000 {
		many = append(many, fmt.Sprintf("n%d", i))
	}
	docs := []struct {
		name string
		doc  string
		cut  bool // whether cutNames may cut it
	}{
		{"plain", splitBase + namesDoc("a", "b"), true},
		{"many chunks", splitBase + namesDoc(many...), true},
		{"many, one bad", splitBase + namesDoc(many[:1500]...) + "\n[[gslb.name]]\nname = 5\n" + namesDoc(many[1500:]...), true},
		{"many, one unknown key", splitBase + namesDoc(many[:1500]...) + "\n[[gslb.name]]\nnam = \"x.gslb.example.com\"\n" + namesDoc(many[1500:]...), true},
		{"names between tables", splitBase + namesDoc("a") + "\n[gslb.server]\nlisten = [\"127.0.0.1:5301\"]\n" + namesDoc("b") +
			"\n[[gslb.pool]]\nname = \"third\"\nmonitors = [\"soa\"]\n[[gslb.pool.member]]\nname = \"t\"\naddress = \"192.0.2.9\"\n" + namesDoc("c"), true},
		{"names first", namesDoc("a", "b") + "\n" + splitBase, true},
		{"[gslb] after the names", strings.Replace(splitBase, "[gslb]\nwhoami = \"whoami.gslb.example.com\"\n", "", 1) + namesDoc("a") + "\n[gslb]\nwhoami = \"whoami.gslb.example.com\"\n" + namesDoc("b"), true},
		{"[gslb] twice", splitBase + namesDoc("a") + "\n[gslb]\nmax_records = 2\n", true},
		{"no final line end", splitBase + strings.TrimSuffix(namesDoc("a", "b"), "\n"), true},
		{"no final line end, split", splitBase + namesDoc("a") + "\n[gslb.server]\nlisten = []\n" + strings.TrimSuffix(namesDoc("b"), "\n"), true},
		{"bom", bom + splitBase + namesDoc("a"), true},
		{"crlf", strings.ReplaceAll(splitBase+namesDoc("a", "b"), "\n", "\r\n"), true},
		{"quoted header", splitBase + strings.ReplaceAll(namesDoc("a"), "[[gslb.name]]", `[["gslb"."name"]]`), true},
		{"spaced header", splitBase + strings.ReplaceAll(namesDoc("a"), "[[gslb.name]]", "  [[ gslb . name ]] # a name"), true},
		{"match as a sub-table", splitBase + "\n[[gslb.name]]\nname = \"a.gslb.example.com\"\n[[gslb.name.policy]]\npool = \"north\"\n[gslb.name.policy.match]\ncarrier = \"cmcc\"\n", true},
		{"policies inline", splitBase + "\n[[gslb.name]]\nname = \"a.gslb.example.com\"\npolicy = [{ pool = \"north\" }, { pool = \"south\", match = {} }]\n", true},
		{"policy without pool", splitBase + "\n[[gslb.name]]\nname = \"a.gslb.example.com\"\n[[gslb.name.policy]]\nmatch = { carrier = \"x\" }\n", true},
		{"duplicate key in a name", splitBase + namesDoc("a") + "\n[[gslb.name]]\nname = \"x.gslb.example.com\"\nname = \"y.gslb.example.com\"\n" + namesDoc("b"), true},
		{"syntax error in a name", splitBase + namesDoc("a") + "ttl = = 3\n", false},
		{"bad value in the rest", strings.Replace(splitBase, "whoami = ", "max_records = \"x\"\nwhoami = ", 1) + namesDoc("a"), true},
		{"[gslb.name] table", splitBase + "\n[gslb.name]\nname = \"a.gslb.example.com\"\n", false},
		{"name key under [gslb]", strings.Replace(splitBase, "[gslb]\n", "[gslb]\nname = [{ name = \"z.gslb.example.com\" }]\n", 1) + namesDoc("a"), false},
		{"dotted name key under [gslb]", strings.Replace(splitBase, "[gslb]\n", "[gslb]\nname.x = 1\n", 1) + namesDoc("a"), false},
		{"gslb key at the root", "gslb.max_records = 2\n" + strings.Replace(splitBase, "[gslb]\n", "[gslb.x]\n", 1) + namesDoc("a"), false},
		{"sub-table outside a name", splitBase + namesDoc("a") + "\n[gslb.server]\n\n[gslb.name.policy]\npool = \"north\"\n", false},
		{"array of gslb", "[[gslb]]\n" + namesDoc("a"), false},
		{"names as an inline array", strings.Replace(splitBase, "[gslb]\n", "[gslb]\nname = [{ name = \"a.gslb.example.com\", policy = [{ pool = \"north\" }] }]\n", 1), false},
		{"service names", splitBase + "\n[[gslb.service]]\nname = \"geo\"\n[[gslb.service.policy]]\npool = \"north\"\n" +
			"\n[[gslb.name]]\nname = \"a.gslb.example.com\"\nservice = \"geo\"\n\n[[gslb.name]]\nname = \"b.gslb.example.com\"\nservice = \"geo\"\nttl = 5\n", true},
	}
	for _, tc := range docs {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.doc)
			_, cut := cutNames([]byte(strings.TrimPrefix(tc.doc, bom)))
			if cut != tc.cut {
				t.Errorf("cut %v, want %v", cut, tc.cut)
			}
			sameAsWhole(t, data, "s.toml")
		})
	}
}

// TestPoliciesHeldOnce: names with the same policies written under each
// share one list of them (and its matches), as names with one service
// share the service's; names of other policies have their own; equal
// static sets and monitor lists are held once too.
func TestPoliciesHeldOnce(t *testing.T) {
	var many []string
	for i := range 2000 {
		many = append(many, fmt.Sprintf("n%d", i))
	}
	other := "\n[[gslb.name]]\nname = \"other.gslb.example.com\"\nlast_resort = \"static\"\nstatic = [\"192.0.2.7\"]\n[[gslb.name.policy]]\npool = \"north\"\n" +
		"\n[[gslb.name]]\nname = \"other2.gslb.example.com\"\nlast_resort = \"static\"\nstatic = [\"192.0.2.7\"]\n[[gslb.name.policy]]\npool = \"north\"\n"
	for _, split := range []bool{true, false} {
		cfg, err := parse([]byte(splitBase+namesDoc(many...)+other), "s.toml", split)
		if err != nil {
			t.Fatal(err)
		}
		names := cfg.GSLB.Names
		first := &names[0].Policies[0]
		m := reflect.ValueOf(names[0].Policies[0].Match).Pointer()
		for i := range many {
			n := &names[i]
			if &n.Policies[0] != first || reflect.ValueOf(n.Policies[0].Match).Pointer() != m {
				t.Fatalf("split %v: %s has its own policies", split, n.Name)
			}
		}
		o, o2 := &names[len(many)], &names[len(many)+1]
		if &o.Policies[0] == first || len(o.Policies) != 1 || &o.Policies[0] != &o2.Policies[0] {
			t.Errorf("split %v: other names' policies %v, %v", split, o.Policies, o2.Policies)
		}
		if &o.Static[0] != &o2.Static[0] || &o.StaticAddrs[0] != &o2.StaticAddrs[0] {
			t.Errorf("split %v: equal static sets held twice", split)
		}
		if p := cfg.GSLB.Pools; &p[0].Monitors[0] != &p[1].Monitors[0] {
			t.Errorf("split %v: equal monitor lists held twice", split)
		}
	}
}

// FuzzSplitAsWhole: any document parses the same with its [[gslb.name]]
// tables decoded apart and without (sameAsWhole). The corpus is every
// example and golden input and documents with names.
func FuzzSplitAsWhole(f *testing.F) {
	for _, data := range tomlFixtures(f) {
		f.Add(data)
	}
	f.Add([]byte(splitBase + namesDoc("a", "b")))
	f.Add([]byte(namesDoc("a") + "\n[gslb]\nmax_records = 1\n" + namesDoc("b")))
	f.Fuzz(func(t *testing.T, data []byte) { sameAsWhole(t, data, "fuzz.toml") })
}
