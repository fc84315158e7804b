package configs

import (
	"bytes"
	"reflect"
	"slices"

	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The [[gslb.name]] tables decoded apart.
//
// A document of 20,000 names with their policies written under each
// (12 MB) made go-toml/v2's generic map 136 MB: a map per table, 180,000
// policy tables and their match tables, all alive at once beside the
// typed configuration. So the document is cut, with go-toml/v2's own
// parser (unstable.Parser: the expressions and where their keys start),
// into the [[gslb.name]] elements (each from its header's line up to
// the next header that is not one of its sub-tables) and the rest. The
// rest is decoded as one document; the elements in chunks of about
// nameChunk bytes, each chunk walked into its GSLBNames and its
// policies interned before the next is decoded, so that no more than a
// chunk's generic tables live at a time.
//
// The cut stands for one decode of the whole document only where TOML
// gives the same value: an element's tables are new tables under
// gslb.name, so nothing outside it can reach into it. The document is
// not cut when anything else could touch gslb.name: a key-value gslb.*
// at the root or name.* under [gslb], a [gslb.name] or a gslb.name
// sub-table header outside an element, an array of tables [[gslb]], a
// header not alone at the start of its line, or anything go-toml/v2's
// parser stops on. Any piece that does not decode, or decodes to
// another shape, gives the decode of the whole document (decodeTOML),
// whose value or error is then the one used: every error keeps its text
// and line. TestSplitAsWhole compares the two on every fixture and on
// documents made to sit on those edges.

// nameChunk is the size from which the elements gathered make a chunk.
const nameChunk = 128 << 10

// nameCut is a document cut into its [[gslb.name]] elements and the
// rest.
type nameCut struct {
	data  []byte
	rest  []byte
	elems [][2]int // [start, end) of each element in data
}

// cutNames cuts data (without a byte order mark) at its [[gslb.name]]
// elements; false when it may not be cut (see above).
func cutNames(data []byte) (*nameCut, bool) {
	c := &nameCut{data: data}
	var p unstable.Parser
	p.Reset(data)
	var parts [][]byte // the current expression's key, valid until the next
	var table []string // the rest's current table
	in := false
	restFrom := 0 // start of the rest's current region, or -1 inside an element
	var rest []byte
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.Table && e.Kind != unstable.ArrayTable && e.Kind != unstable.KeyValue {
			continue
		}
		parts = parts[:0]
		first := -1
		it := e.Key()
		for it.Next() {
			k := it.Node()
			if first < 0 {
				first = int(k.Raw.Offset)
			}
			parts = append(parts, k.Data)
		}
		if len(parts) == 0 {
			return nil, false
		}
		if e.Kind == unstable.KeyValue {
			if !in && (len(table) == 0 && string(parts[0]) == "gslb" || len(table) == 1 && table[0] == "gslb" && string(parts[0]) == "name") {
				return nil, false
			}
			continue
		}
		start, ok := lineStart(data, first)
		if !ok {
			return nil, false
		}
		under := len(parts) >= 2 && string(parts[0]) == "gslb" && string(parts[1]) == "name"
		switch {
		case under && len(parts) == 2 && e.Kind == unstable.ArrayTable:
			if in {
				c.elems[len(c.elems)-1][1] = start
			} else {
				rest = append(rest, data[restFrom:start]...)
			}
			c.elems = append(c.elems, [2]int{start, len(data)})
			in, restFrom = true, -1
		case under:
			if !in || len(parts) == 2 {
				return nil, false
			}
		default:
			if len(parts) == 1 && string(parts[0]) == "gslb" && e.Kind == unstable.ArrayTable {
				return nil, false
			}
			if in {
				c.elems[len(c.elems)-1][1] = start
				in, restFrom = false, start
			}
			table = table[:0]
			for _, k := range parts {
				table = append(table, string(k))
			}
		}
	}
	if p.Error() != nil {
		return nil, false
	}
	if restFrom >= 0 {
		rest = append(rest, data[restFrom:]...)
	}
	c.rest = rest
	return c, true
}

// lineStart returns the start of the line of a header whose first key
// starts at off: only blanks and '[' may come before it on its line.
func lineStart(data []byte, off int) (int, bool) {
	i := off
	for i > 0 && (data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '[') {
		i--
	}
	return i, i == 0 || data[i-1] == '\n'
}

// chunk returns the elements from lo that make the next chunk (up to
// hi) and their text.
func (c *nameCut) chunk(lo int) (int, []byte) {
	hi, size, contiguous := lo, 0, true
	for hi < len(c.elems) && (hi == lo || size < nameChunk) {
		if hi > lo && c.elems[hi][0] != c.elems[hi-1][1] {
			contiguous = false
		}
		size += c.elems[hi][1] - c.elems[hi][0]
		hi++
	}
	if contiguous {
		return hi, c.data[c.elems[lo][0]:c.elems[hi-1][1]]
	}
	text := make([]byte, 0, size+hi-lo)
	for _, e := range c.elems[lo:hi] {
		text = append(text, c.data[e[0]:e[1]]...)
		if len(text) > 0 && text[len(text)-1] != '\n' {
			text = append(text, '\n')
		}
	}
	return hi, text
}

// chunkNames returns the n [[gslb.name]] tables of a decoded chunk, or
// false when it is not exactly those.
func chunkNames(m map[string]any, n int) ([]map[string]any, bool) {
	g, ok := m["gslb"].(map[string]any)
	if !ok || len(m) != 1 || len(g) != 1 {
		return nil, false
	}
	ns, ok := g["name"].([]map[string]any)
	return ns, ok && len(ns) == n
}

// splitNames holds the [[gslb.name]] tables decoded apart: the names
// walked (interned), what validation needs of their tables, and whether
// every one was sound.
type splitNames struct {
	names []GSLBName
	raw   []nameTable
	sound bool
}

// decodeSplit decodes data cut at its [[gslb.name]] elements: it
// returns the generic map of the rest and keeps the names walked in
// d.split, or returns nil (nothing recorded) when data was not cut or a
// piece did not decode as it should; the whole document is decoded then.
func (d *decoder) decodeSplit(data []byte) map[string]any {
	c, ok := cutNames(bytes.TrimPrefix(data, []byte(bom)))
	if !ok || len(c.elems) == 0 {
		return nil
	}
	var raw map[string]any
	if gotoml.Unmarshal(c.rest, &raw) != nil {
		return nil
	}
	if raw == nil {
		raw = map[string]any{}
	}
	c.rest = nil
	tablesIn(raw)
	switch g := raw["gslb"].(type) {
	case nil:
		if _, present := raw["gslb"]; present {
			return nil
		}
		raw["gslb"] = map[string]any{}
	case map[string]any:
		if hasKey(g, "name") {
			return nil
		}
	default:
		return nil
	}
	mark := len(d.p.list)
	s := &splitNames{names: make([]GSLBName, len(c.elems)), raw: make([]nameTable, len(c.elems)), sound: true}
	w := walker{d.p}
	for lo := 0; lo < len(c.elems); {
		hi, text := c.chunk(lo)
		var m map[string]any
		if gotoml.Unmarshal(text, &m) != nil {
			d.p.list = d.p.list[:mark]
			return nil
		}
		tablesIn(m)
		tabs, ok := chunkNames(m, hi-lo)
		if !ok {
			d.p.list = d.p.list[:mark]
			return nil
		}
		for j, t := range tabs {
			i := lo + j
			s.raw[i] = nameTableOf(t)
			if !w.table(indexKey("gslb.name", i), t, reflect.ValueOf(&s.names[i]).Elem()) {
				s.sound = false
			}
			d.intern.name(&s.names[i])
		}
		lo = hi
	}
	d.split = s
	return raw
}

// nameTable is what validation asks of a [[gslb.name]]'s generic table:
// which keys it sets and which of its policies set pool. It is kept
// instead of the table.
type nameTable struct {
	keys     uint8
	policies int32
	noPool   []int32 // the policies without pool
}

// nameTableBit is the bit of key k in nameTable.keys, or 0 for a key
// it does not record.
func nameTableBit(k string) uint8 {
	switch k {
	case "name":
		return 1 << 0
	case "service":
		return 1 << 1
	case "ttl":
		return 1 << 2
	case "last_resort":
		return 1 << 3
	case "ecs":
		return 1 << 4
	case "static":
		return 1 << 5
	case "policy":
		return 1 << 6
	}
	return 0
}

// nameTableOf records table m.
func nameTableOf(m map[string]any) nameTable {
	var t nameTable
	for k := range m {
		t.keys |= nameTableBit(k)
	}
	praw, _ := tables(m["policy"])
	t.policies = int32(len(praw))
	for j, pm := range praw {
		if !hasKey(pm, "pool") {
			t.noPool = append(t.noPool, int32(j))
		}
	}
	return t
}

// nameTablesOf records the tables ms.
func nameTablesOf(ms []map[string]any) []nameTable {
	out := make([]nameTable, len(ms))
	for i, m := range ms {
		out[i] = nameTableOf(m)
	}
	return out
}

// has reports whether the table set key k (one nameTableBit records).
func (t nameTable) has(k string) bool { return t.keys&nameTableBit(k) != 0 }

// hasPool reports whether policy j of the table set pool.
func (t nameTable) hasPool(j int) bool {
	return j < int(t.policies) && !slices.Contains(t.noPool, int32(j))
}

// nameTableAt returns ts[i], or an empty table's record when there are
// fewer.
func nameTableAt(ts []nameTable, i int) nameTable {
	if i < len(ts) {
		return ts[i]
	}
	return nameTable{}
}
