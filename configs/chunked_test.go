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
)

// sameValue is reflect.DeepEqual, but for NaN floats, equal to themselves.
func sameValue(a, b any) bool {
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

// sameSlice reports whether b is a []T of a's length whose elements are
// sameValue as a's.
func sameSlice[T any](a []T, b any) bool {
	bs, ok := b.([]T)
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

// checkChunked decodes doc serially and cut at every possible header, and
// fails t unless both give the same value or the same error. It reports
// whether the cut decode stood for the serial one (no fallback).
func checkChunked(t testing.TB, doc string) (split bool) {
	t.Helper()
	want, werr := decodeSerial(doc)
	got, gerr := decodeChunked([]byte(doc), 0, 1, 4)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("serial error %v, chunked error %v\n%s", werr, gerr, doc)
	case werr != nil && werr.Error() != gerr.Error():
		t.Fatalf("serial error %q, chunked error %q\n%s", werr, gerr, doc)
	case werr == nil && !sameValue(got, want):
		t.Fatalf("chunked decode differs:\n got %#v\nwant %#v\n%s", got, want, doc)
	}
	m, ok := decodeSplit(doc, 1, 4)
	if !ok {
		return false
	}
	if werr != nil {
		t.Fatalf("cut decode accepts what the serial decode rejects (%v)\n%s", werr, doc)
	}
	if !sameValue(m, want) {
		t.Fatalf("cut decode differs:\n got %#v\nwant %#v\n%s", m, want, doc)
	}
	return true
}

// chunkedCases are documents for the cut decode: split tells whether it
// stands for the serial decode (else it falls back), bad whether the
// document is an error.
var chunkedCases = []struct {
	name, doc  string
	split, bad bool
}{
	{name: "arrays of tables with sub-tables", split: true, doc: `[daemon]
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
	{name: "implicit parents", split: true, doc: "[a.b]\nx = 1\n[[n]]\ny = 1\n[a.c]\nz = 2\n[[n]]\n[a.d.e]\n"},
	{name: "explicit table after its sub-table", doc: "[a.b]\nx = 1\n[[n]]\n[a]\ny = 2\n"},
	{name: "table defined twice", bad: true, doc: "[a]\nx = 1\n[[n]]\n[a]\n"},
	{name: "table defined twice, implicitly first", bad: true, doc: "[a.b]\n[[n]]\n[a]\n[[n]]\n[a]\n"},
	{name: "multi-line strings holding headers", split: true, doc: "[[n]]\ns = \"\"\"\n[[n]]\nx = 1\n\"\"\"\n[[n]]\nt = '''\n[[n]]\n'''\n[[n]]\nu = \"\"\"x\\\"\"\"\n[[n]]\n\"\"\"\n[[n]]\nv = \"\"\"a\"\"\"\"\n[[n]]\n"},
	{name: "multi-line arrays holding header-like lines", split: true, doc: "[[n]]\na = [\n  [1, 2],\n[\"x\"],\n[[3]],\n]\n[[n]]\nb = [ # [\n]\n[[n]]\n"},
	{name: "comments", split: true, doc: "[[n]] # first\n# [[n]]\nx = 1 # [[n]]\n[[n]]#\n"},
	{name: "dotted keys", split: true, doc: "[[n]]\na.b.c = 1\na.b.d = 2\n[[n]]\na.b.c = 3\n"},
	{name: "duplicate key", bad: true, doc: "[[n]]\nx = 1\n[[n]]\nx = 1\nx = 2\n"},
	{name: "array of tables over a table", bad: true, doc: "[n]\nx = 1\n[[m]]\n[[n]]\n"},
	{name: "array of tables over an array", bad: true, doc: "n = [{x = 1}]\n[[m]]\n[[n]]\n"},
	{name: "array of tables over a value", bad: true, doc: "[g]\nn = 1\n[[m]]\n[[g.n]]\n"},
	// The serial decoder keeps keyInfo by key path: x, typed Array in the
	// first element, makes it drop x.b from the second one.
	{name: "key typed array in an earlier element", doc: "[[n]]\nx = [1]\n[[n]]\nx.b = 1\nx.c = 2\n"},
	{name: "inline table extended later", doc: "[g]\nt = {a = 1}\n[[g.n]]\n[g.t.b]\n"},
	{name: "dotted table extended later", doc: "[g]\nt.a = 1\n[[g.n]]\n[g.t.b]\n"},
	{name: "root dotted table extended later", doc: "g.a = 1\n[[g.n]]\n"},
	{name: "sub-array of an earlier element", doc: "[[p]]\nname = 1\n[[n]]\n[[p.m]]\n"},
	{name: "sub-table of an earlier element", doc: "[[n]]\n[[m]]\n[n.x]\n"},
	{name: "quoted header", doc: "[[n]]\n[\"a b\"]\n[[n]]\n"},
	{name: "spaced header", doc: "[[n]]\n[[ n ]]\n"},
	{name: "header followed by a key", bad: true, doc: "[[n]]\n[[n]] x = 1\n"},
	{name: "CRLF", split: true, doc: "[[n]]\r\nx = 1\r\n[[n]]\r\nx = 2\r\n"},
	{name: "unterminated string", bad: true, doc: "[[n]]\nx = \"abc\n[[n]]\n"},
	{name: "unterminated multi-line string", bad: true, doc: "[[n]]\nx = \"\"\"abc\n[[n]]\n"},
	{name: "unclosed array", bad: true, doc: "[[n]]\nx = [1,\n[[n]]\n"},
	{name: "root keys", split: true, doc: "a = 1\n[[n]]\nb = 2\n"},
	{name: "empty elements", split: true, doc: "[[n]]\n[[n]]\n"},
	{name: "literal string ending in a backslash", split: true, doc: "[[n]]\nx = 'a\\'\n[[n]]\n"},
	{name: "escaped quote before a bracket", split: true, doc: "[[n]]\nx = \"a\\\"[\"\n[[n]]\n"},
	{name: "same sub-table in two elements", split: true, doc: "[[n]]\n[n.t]\n[[n]]\n[n.t]\n"},
	{name: "table after the arrays", split: true, doc: "[[n]]\n[[n]]\n[z]\na = 1\n"},
	{name: "values of every kind", split: true, doc: "[[n]]\nt = 1979-05-27T07:32:00-08:00\nd = 1979-05-27\nl = 07:32:00\nf = nan\ng = -inf\ni = 0x1f\n[[n]]\nb = true\ns = \"\\u00e9\"\n"},
	{name: "two split paths interleaved", split: true, doc: "[[a]]\nx = 1\n[[b]]\ny = 2\n[[b.c]]\n[[a]]\nx = 3\n[[b]]\n[[b.c]]\n"},
	{name: "sub-array of an earlier chunk's element", doc: "[[a]]\nx = 1\n[[b]]\ny = 2\n[[a]]\nx = 3\n[[b.c]]\n[[b]]\n"},
	{name: "static array then array of tables", bad: true, doc: "[[a]]\n[g]\nb = []\n[[a]]\n[[g.b]]\n"},
	{name: "NUL byte", bad: true, doc: "[[n]]\nx = 1\n[[n]]\n\x00\n"},
	{name: "header after an array closed mid-line", bad: true, doc: "0=[\n0][[1]]"},
	{name: "array closed, then a header line", split: true, doc: "[[n]]\nx = [\n1]\n[[n]]\n"},
	{name: "BOM", split: true, doc: "\xef\xbb\xbf[[n]]\nx = 1\n[[n]]\n"},
}

func TestDecodeChunkedCases(t *testing.T) {
	for _, tc := range chunkedCases {
		t.Run(tc.name, func(t *testing.T) {
			split := checkChunked(t, tc.doc)
			if split != tc.split {
				t.Errorf("cut decode used: %v, want %v", split, tc.split)
			}
			if _, err := decodeSerial(tc.doc); (err != nil) != tc.bad {
				t.Errorf("serial error %v, want an error: %v", err, tc.bad)
			}
		})
	}
}

// chunkedFixtures returns every example config and golden input.
func chunkedFixtures(tb testing.TB) map[string][]byte {
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

func TestDecodeChunkedFixtures(t *testing.T) {
	splits := 0
	for file, data := range chunkedFixtures(t) {
		t.Run(file, func(t *testing.T) {
			if checkChunked(t, string(data)) {
				splits++
			}
		})
	}
	if splits == 0 {
		t.Error("no fixture was decoded in chunks")
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

func TestDecodeChunkedBig(t *testing.T) {
	doc := bigDoc(1000)
	if len(doc) < bigDocument {
		t.Fatalf("document of %d bytes, want at least %d", len(doc), bigDocument)
	}
	if n := len(planChunks(doc, minChunk)); n < 2 {
		t.Fatalf("%d chunks", n)
	}
	if !checkChunked(t, doc) {
		t.Fatal("big document not decoded in chunks")
	}
	want, err := decodeSerial(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 3, 8} {
		got, err := decodeChunked([]byte(doc), bigDocument, minChunk, workers)
		if err != nil || !sameValue(got, want) {
			t.Fatalf("workers %d: differs (error %v)", workers, err)
		}
	}
	got, err := decodeTOML([]byte(doc))
	if err != nil || !sameValue(got, want) {
		t.Fatalf("decodeTOML differs (error %v)", err)
	}
	// A config so decoded loads as the serial one does.
	cfg, err := Parse([]byte(strings.Replace(doc, `state_dir = "/tmp"`, fmt.Sprintf("state_dir = %q", t.TempDir()), 1)), "big.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.GSLB.Names) != 1000 {
		t.Fatalf("%d names", len(cfg.GSLB.Names))
	}
}

func TestPlanChunks(t *testing.T) {
	doc := "a = 1\n[[n]]\nx = 1\n[[n.m]]\n[[n]]\ny = \"\"\"\n[[n]]\n\"\"\"\n[t]\n[[n]]\n"
	var got []string
	for _, c := range planChunks(doc, 1) {
		got = append(got, c.text)
	}
	want := []string{"a = 1\n", "[[n]]\nx = 1\n[[n.m]]\n", "[[n]]\ny = \"\"\"\n[[n]]\n\"\"\"\n[t]\n", "[[n]]\n"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks %q, want %q", got, want)
	}
	if n := len(planChunks(doc, 27)); n != 2 {
		t.Fatalf("%d chunks of at least 27 bytes, want 2", n)
	}
	if h, ok := scanHeaders("a = [\n1][[n]]\n[[m]]\n"); !ok || len(h) != 1 || h[0].path != "m" || h[0].off != 14 {
		t.Fatalf("headers %+v, %v; want only [[m]] at 14", h, ok)
	}
	if c := planChunks("[[n]]\n[ n ]\n[[n]]\n", 1); c != nil {
		t.Fatalf("cut a document with a spaced header: %d chunks", len(c))
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

func TestDecodeChunkedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 15))
	splits := 0
	for range 5000 {
		if checkChunked(t, randomDoc(r)) {
			splits++
		}
	}
	t.Logf("%d of 5000 documents decoded in chunks", splits)
	if splits < 500 {
		t.Errorf("only %d documents decoded in chunks", splits)
	}
}

// FuzzChunkedDecode checks that the cut decode gives the serial decode's
// value or error. The corpus is testdata/fuzz/FuzzChunkedDecode plus the
// fixtures, the cases above and random documents.
func FuzzChunkedDecode(f *testing.F) {
	for _, data := range chunkedFixtures(f) {
		f.Add(data)
	}
	for _, tc := range chunkedCases {
		f.Add([]byte(tc.doc))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		f.Add([]byte(randomDoc(r)))
	}
	f.Add([]byte(bigDoc(3)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Count(data, []byte("\n")) > 2000 {
			return
		}
		checkChunked(t, string(data))
	})
}

// BenchmarkDecodeChunked compares the serial decode of a document shaped
// like the big reload's (10,000 names, 50,000 members, 5 MB) with
// decodeTOML's, on GOMAXPROCS cores.
func BenchmarkDecodeChunked(b *testing.B) {
	doc := []byte(bigDoc(10000))
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeSerial(string(doc)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunked", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeTOML(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
