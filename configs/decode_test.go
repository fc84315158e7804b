package configs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"
)

// sameValue reports whether a (go-toml/v2's decode) and b (BurntSushi's)
// are the same document: arrays of tables as []any or []map[string]any,
// date-times by their text and zone, NaN floats equal to themselves.
func sameValue(a, b any) bool {
	if ta, ok := asTime(a); ok {
		tb, ok := asTime(b)
		return ok && ta.Format(time.RFC3339Nano) == tb.Format(time.RFC3339Nano) && ta.Location().String() == tb.Location().String()
	}
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []map[string]any:
		return sameSlice(a, b)
	case []any:
		return sameSlice(a, b)
	case float64:
		b, ok := b.(float64)
		return ok && (a == b || math.IsNaN(a) && math.IsNaN(b))
	}
	return reflect.DeepEqual(a, b)
}

// sameSlice reports whether b is an array of a's length whose elements
// are sameValue as a's.
func sameSlice[T any](a []T, b any) bool {
	bs, ok := anySlice(b)
	if !ok || len(a) != len(bs) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], bs[i]) {
			return false
		}
	}
	return true
}

// keepsMore reports whether a (go-toml/v2's decode) is b (BurntSushi's)
// with keys b lost: BurntSushi/toml v1.6.0 types key paths, not array
// elements, so a key x that is an array in one [[n]] element makes it
// drop the keys under x (x.b = 1) of a later element. decodeTOML gives
// go-toml/v2's value, the document's.
func keepsMore(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, w := range b {
			v, ok := a[k]
			if !ok || !sameValue(v, w) && !keepsMore(v, w) {
				return false
			}
		}
		return true
	case []map[string]any, []any:
		av, _ := anySlice(a)
		bv, ok := anySlice(b)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !sameValue(av[i], bv[i]) && !keepsMore(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// anySlice returns the array v as []any, and false when v is not an
// array.
func anySlice(v any) ([]any, bool) {
	switch v := v.(type) {
	case []any:
		return v, true
	case []map[string]any:
		out := make([]any, len(v))
		for i, m := range v {
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// checkDecode fails t unless decodeTOML gives what BurntSushi/toml gives
// for doc: the same value, or BurntSushi's error. It reports whether
// go-toml/v2 decoded it (no second decode).
func checkDecode(t testing.TB, doc string) (fast bool) {
	t.Helper()
	want, werr := decodeBurntSushi([]byte(doc))
	var m map[string]any
	fast = gotoml.Unmarshal([]byte(strings.TrimPrefix(doc, bom)), &m) == nil
	got, gerr := decodeTOML([]byte(doc))
	switch {
	case werr != nil && gerr == nil:
		t.Fatalf("decodeTOML accepts what BurntSushi/toml rejects (%v)\n%q", werr, doc)
	case werr == nil && gerr != nil:
		t.Fatalf("decodeTOML rejects what BurntSushi/toml accepts: %v\n%q", gerr, doc)
	case werr != nil && werr.Error() != gerr.Error():
		t.Fatalf("BurntSushi/toml's error %q, decodeTOML's %q\n%q", werr, gerr, doc)
	case werr == nil && !sameValue(got, want) && !keepsMore(got, want):
		t.Fatalf("decodeTOML differs:\n got %#v\nwant %#v\n%q", got, want, doc)
	}
	return fast
}

var decodeCases = []struct {
	name, doc string
	// bad: an error; slow: go-toml/v2 rejects it and BurntSushi/toml
	// accepts it.
	bad, slow bool
}{
	{name: "arrays of tables with sub-tables", doc: `[daemon]
state_dir = "/tmp"

[gslb]
policy_order = ["region", "global"]

[[gslb.pool]]
name = "p0"
monitors = ["tcp"]
[[gslb.pool.member]]
name = "m0"
[[gslb.pool.member]]
name = "m1"
[gslb.pool.extra]
x = 1
[[gslb.pool]]
name = "p1"
[[gslb.pool.member]]
name = "m2"
[[gslb.name]]
name = "a"
[[gslb.name.policy]]
match = { region = "r0" }
pool = "p0"
[[gslb.name]]
name = "b"
`},
	{name: "implicit parents", doc: "[a.b]\nx = 1\n[[n]]\ny = 1\n[a.c]\nz = 2\n[[n]]\n[a.d.e]\n"},
	{name: "explicit table after its sub-table", doc: "[a.b]\nx = 1\n[[n]]\n[a]\ny = 2\n"},
	{name: "table defined twice", bad: true, doc: "[a]\nx = 1\n[[n]]\n[a]\n"},
	{name: "table defined twice, implicitly first", bad: true, doc: "[a.b]\n[[n]]\n[a]\n[[n]]\n[a]\n"},
	{name: "multi-line strings holding headers", doc: "[[n]]\ns = \"\"\"\n[[n]]\nx = 1\n\"\"\"\n[[n]]\nt = '''\n[[n]]\n'''\n[[n]]\nu = \"\"\"x\\\"\"\"\n[[n]]\n\"\"\"\n[[n]]\nv = \"\"\"a\"\"\"\"\n[[n]]\n"},
	{name: "multi-line arrays holding header-like lines", doc: "[[n]]\na = [\n  [1, 2],\n[\"x\"],\n[[3]],\n]\n[[n]]\nb = [ # [\n]\n[[n]]\n"},
	{name: "comments", doc: "[[n]] # first\n# [[n]]\nx = 1 # [[n]]\n[[n]]#\n"},
	{name: "dotted keys", doc: "[[n]]\na.b.c = 1\na.b.d = 2\n[[n]]\na.b.c = 3\n"},
	{name: "duplicate key", bad: true, doc: "[[n]]\nx = 1\n[[n]]\nx = 1\nx = 2\n"},
	{name: "array of tables over a table", bad: true, doc: "[n]\nx = 1\n[[m]]\n[[n]]\n"},
	{name: "array of tables over an array", bad: true, doc: "n = [{x = 1}]\n[[m]]\n[[n]]\n"},
	{name: "array of tables over a value", bad: true, doc: "[g]\nn = 1\n[[m]]\n[[g.n]]\n"},
	// The serial decoder keeps keyInfo by key path: x, typed Array in the
	// first element, makes it drop x.b from the second one.
	{name: "key typed array in an earlier element", doc: "[[n]]\nx = [1]\n[[n]]\nx.b = 1\nx.c = 2\n"},
	{name: "inline table extended later", slow: true, doc: "[g]\nt = {a = 1}\n[[g.n]]\n[g.t.b]\n"},
	{name: "dotted table extended later", doc: "[g]\nt.a = 1\n[[g.n]]\n[g.t.b]\n"},
	{name: "root dotted table extended later", doc: "g.a = 1\n[[g.n]]\n"},
	{name: "sub-array of an earlier element", doc: "[[p]]\nname = 1\n[[n]]\n[[p.m]]\n"},
	{name: "sub-table of an earlier element", doc: "[[n]]\n[[m]]\n[n.x]\n"},
	{name: "quoted header", doc: "[[n]]\n[\"a b\"]\n[[n]]\n"},
	{name: "spaced header", doc: "[[n]]\n[[ n ]]\n"},
	{name: "header followed by a key", bad: true, doc: "[[n]]\n[[n]] x = 1\n"},
	{name: "CRLF", doc: "[[n]]\r\nx = 1\r\n[[n]]\r\nx = 2\r\n"},
	{name: "unterminated string", bad: true, doc: "[[n]]\nx = \"abc\n[[n]]\n"},
	{name: "unterminated multi-line string", bad: true, doc: "[[n]]\nx = \"\"\"abc\n[[n]]\n"},
	{name: "unclosed array", bad: true, doc: "[[n]]\nx = [1,\n[[n]]\n"},
	{name: "root keys", doc: "a = 1\n[[n]]\nb = 2\n"},
	{name: "empty elements", doc: "[[n]]\n[[n]]\n"},
	{name: "literal string ending in a backslash", doc: "[[n]]\nx = 'a\\'\n[[n]]\n"},
	{name: "escaped quote before a bracket", doc: "[[n]]\nx = \"a\\\"[\"\n[[n]]\n"},
	{name: "same sub-table in two elements", doc: "[[n]]\n[n.t]\n[[n]]\n[n.t]\n"},
	{name: "table after the arrays", doc: "[[n]]\n[[n]]\n[z]\na = 1\n"},
	{name: "values of every kind", doc: "[[n]]\nt = 1979-05-27T07:32:00-08:00\nd = 1979-05-27\nl = 07:32:00\nf = nan\ng = -inf\ni = 0x1f\n[[n]]\nb = true\ns = \"\\u00e9\"\n"},
	{name: "two split paths interleaved", doc: "[[a]]\nx = 1\n[[b]]\ny = 2\n[[b.c]]\n[[a]]\nx = 3\n[[b]]\n[[b.c]]\n"},
	{name: "sub-array of an earlier chunk's element", doc: "[[a]]\nx = 1\n[[b]]\ny = 2\n[[a]]\nx = 3\n[[b.c]]\n[[b]]\n"},
	{name: "static array then array of tables", bad: true, doc: "[[a]]\n[g]\nb = []\n[[a]]\n[[g.b]]\n"},
	{name: "NUL byte", bad: true, doc: "[[n]]\nx = 1\n[[n]]\n\x00\n"},
	{name: "header after an array closed mid-line", bad: true, doc: "0=[\n0][[1]]"},
	{name: "array closed, then a header line", doc: "[[n]]\nx = [\n1]\n[[n]]\n"},
	{name: "BOM", doc: "\xef\xbb\xbf[[n]]\nx = 1\n[[n]]\n"},
}

func TestDecodeCases(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			fast := checkDecode(t, tc.doc)
			if fast != (!tc.bad && !tc.slow) {
				t.Errorf("go-toml/v2 decoded it: %v, want %v", fast, !fast)
			}
			if _, err := decodeTOML([]byte(tc.doc)); (err != nil) != tc.bad {
				t.Errorf("error %v, want an error: %v", err, tc.bad)
			}
		})
	}
}

// tomlFixtures returns every example config and golden input.
func tomlFixtures(tb testing.TB) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{"*.toml", "testdata/*.toml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			tb.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				tb.Fatal(err)
			}
			out[file] = data
		}
	}
	if len(out) < 10 {
		tb.Fatalf("only %d fixtures", len(out))
	}
	return out
}

func TestDecodeFixtures(t *testing.T) {
	for file, data := range tomlFixtures(t) {
		t.Run(file, func(t *testing.T) {
			checkDecode(t, string(data))
		})
	}
}

// bigDoc returns a config shaped like the big reload's, with names names.
func bigDoc(names int) string {
	var b strings.Builder
	b.WriteString("[daemon]\nstate_dir = \"/tmp\"\n\n[check.tcp]\nkind = \"tcp\"\n\n[check.tcp.tcp]\nport = 8053\n\n[gslb]\npolicy_order = [\"region\", \"global\"]\n\n[gslb.topology]\nlevels = [\"region\"]\n\n")
	for k := range 10 {
		fmt.Fprintf(&b, "[[gslb.topology.file]]\npath = \"nets/r%d.txt\"\nlabels = { region = \"r%d\" }\n\n", k, k)
	}
	for p := range names {
		fmt.Fprintf(&b, "[[gslb.pool]]\nname = \"p%d\"\nmonitors = [\"tcp\"]\n\n", p)
		for j := range 5 {
			fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"127.0.%d.%d\"\n\n", j, p%250, j+1)
		}
	}
	b.WriteString("[[gslb.zone]]\nname = \"bench.test\"\nns = [\"ns1.bench.test.\"]\n\n[[gslb.zone.record]]\nname = \"s\"\ntype = \"A\"\nvalue = \"198.18.0.1\"\n\n")
	for k := range names {
		fmt.Fprintf(&b, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nttl = 30\n\n[[gslb.name.policy]]\nmatch = { region = \"r%d\" }\npool = \"p%d\"\n\n", k, k%10, k)
	}
	return b.String()
}

func TestDecodeBig(t *testing.T) {
	doc := bigDoc(1000)
	if !checkDecode(t, doc) {
		t.Fatal("big document not decoded by go-toml/v2")
	}
	cfg, err := Parse([]byte(strings.Replace(doc, `state_dir = "/tmp"`, fmt.Sprintf("state_dir = %q", t.TempDir()), 1)), "big.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.GSLB.Names) != 1000 {
		t.Fatalf("%d names", len(cfg.GSLB.Names))
	}
}

// randomDoc builds a small document from pieces that meet across chunks:
// the same paths as tables, arrays of tables, dotted keys, inline tables
// and static arrays.
func randomDoc(r *rand.Rand) string {
	paths := []string{"n", "m", "n.p", "n.x", "g", "g.t", "g.n", "x", "a.b", "a", "g.t.b", "n.x.b"}
	keys := []string{"x", "y", "x.b", "x.c", "t", "t.a", "n", "p", "\"x\"", "x.b.c", "b"}
	values := []string{"1", "[1]", "{a = 1}", "[{a = 1}]", "\"s\"", "\"\"\"\n[[n]]\n\"\"\"", "[\n[1],\n]", "{}", "[]", "{b.c = 1}", "[[{a = [1]}]]"}
	var b strings.Builder
	for range 1 + r.IntN(12) {
		switch r.IntN(5) {
		case 0, 1:
			fmt.Fprintf(&b, "[[%s]]\n", paths[r.IntN(len(paths))])
		case 2:
			fmt.Fprintf(&b, "[%s]\n", paths[r.IntN(len(paths))])
		default:
			fmt.Fprintf(&b, "%s = %s\n", keys[r.IntN(len(keys))], values[r.IntN(len(values))])
		}
	}
	return b.String()
}

func TestDecodeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 15))
	fast := 0
	for range 5000 {
		if checkDecode(t, randomDoc(r)) {
			fast++
		}
	}
	t.Logf("%d of 5000 documents decoded by go-toml/v2", fast)
	if fast < 500 {
		t.Errorf("only %d documents decoded by go-toml/v2", fast)
	}
}

// FuzzDecode checks that decodeTOML gives BurntSushi/toml's value or
// error. The corpus is testdata/fuzz/FuzzDecode plus the fixtures, the
// cases above and random documents.
func FuzzDecode(f *testing.F) {
	for _, data := range tomlFixtures(f) {
		f.Add(data)
	}
	for _, tc := range decodeCases {
		f.Add([]byte(tc.doc))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		f.Add([]byte(randomDoc(r)))
	}
	f.Add([]byte(bigDoc(3)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 100_000 {
			return
		}
		checkDecode(t, string(data))
	})
}

// BenchmarkDecode decodes a document shaped like the big reload's (10,000
// names, 50,000 members, 5 MB) with decodeTOML and, beside it, with
// BurntSushi/toml alone and with go-toml/v2's strict typed decode (not
// used: it stops at the first value of a wrong type); "lines" builds the
// line index that problem messages take their lines from.
func BenchmarkDecode(b *testing.B) {
	doc := []byte(bigDoc(10000))
	b.Run("gotoml-strict", func(b *testing.B) {
		for b.Loop() {
			var c Config
			d := gotoml.NewDecoder(bytes.NewReader(doc))
			d.DisallowUnknownFields()
			if err := d.Decode(&c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lines", func(b *testing.B) {
		for b.Loop() {
			if len(scanLines(doc)) == 0 {
				b.Fatal("no lines")
			}
		}
	})
	b.Run("burntsushi", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeBurntSushi(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeTOML", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeTOML(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
