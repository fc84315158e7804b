package configs

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// Parallel decoding of big documents.
//
// A big config (the issue 9 reload: 10,000 names, 10,000 pools) spends
// most of its decode in BurntSushi/toml's single-threaded parser. decodeTOML
// cuts such a document into chunks at top-level [[P]] header lines, decodes
// the chunks on all cores and merges the maps in order. The result is
// exactly what one toml.Decode of the whole document gives, or the whole
// document is decoded serially: any chunk error, anything the merge cannot
// prove equal, and every small document take the serial path, so errors
// (and their lines) are always the serial decoder's own.
//
// Why the merge is exact (BurntSushi/toml v1.6.0's parser, parse.go):
//
//   - Chunks start at a line that begins a top-level header, after a '\n'.
//     A chunk that decodes alone ended with the lexer at top level, so
//     the serial parser lexes every chunk's bytes the same way, and the
//     chunk's first header resets the current table.
//   - What a chunk sees of the chunks before it is the value tree and two
//     tables keyed by key path (not by array element): implicits and
//     keyInfo. Value tree: the merge takes keys found on one side only,
//     appends arrays of tables only where both sides hold [[Q]] headers of
//     a split path Q, and descends into a table found on both sides only
//     where the later chunk created it implicitly (no keyInfo there: no
//     [Q] header, no key/value) as the parent of one of its headers and the
//     earlier chunks defined it by headers too; everything else falls back.
//     implicits: the serial parser can only hold more of them, which turns
//     some errors of a chunk decoded alone into silent acceptance; a chunk
//     error always falls back, so that is safe. keyInfo: an older "Array"
//     type at a path can make the serial parser replace an implicit table
//     the chunk alone keeps; the merge falls back when a path holding a
//     table in the later chunk was typed Array by an earlier one.
//
// Some checks are stricter than v1.6.0 needs (the earlier chunks' tables
// defined by headers, not inline or by dotted keys, which v1.6.0 lets a
// later header extend), so that a stricter parser stays equal. After an
// upgrade of BurntSushi/toml, chunked_test.go (every document cut at
// every header and compared with the serial decode) and
// FuzzChunkedDecode are the check.

// Default thresholds of decodeTOML: documents under bigDocument bytes,
// and chunks under minChunk bytes, are not split.
const (
	bigDocument = 256 << 10
	minChunk    = 64 << 10
)

// decodeTOML decodes a TOML document into its generic map, with the same
// result and error as toml.Decode, on all cores when the document is big.
func decodeTOML(data []byte) (map[string]any, error) {
	workers := runtime.GOMAXPROCS(0)
	// About four chunks a worker, so that an uneven chunk does not leave
	// cores idle at the end.
	return decodeChunked(data, bigDocument, max(minChunk, len(data)/(4*workers)), workers)
}

// decodeSerial is one toml.Decode of the whole document.
func decodeSerial(doc string) (map[string]any, error) {
	var raw map[string]any
	if _, err := toml.Decode(doc, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// decodeChunked decodes data in chunks of at least chunkMin bytes with up to
// workers goroutines when data holds at least docMin bytes, else serially.
// Tests pass tiny thresholds to split at every possible header.
func decodeChunked(data []byte, docMin, chunkMin, workers int) (map[string]any, error) {
	doc := string(data)
	if len(doc) >= docMin && workers >= 2 {
		if m, ok := decodeSplit(doc, chunkMin, workers); ok {
			return m, nil
		}
	}
	return decodeSerial(doc)
}

// decodeSplit decodes doc in chunks of at least chunkMin bytes; ok is
// false when doc was not cut or the chunks cannot stand for it (then the
// serial decode has the answer).
func decodeSplit(doc string, chunkMin, workers int) (m map[string]any, ok bool) {
	chunks := planChunks(doc, chunkMin)
	if len(chunks) < 2 {
		return nil, false
	}
	decodeAll(chunks, workers)
	return mergeChunks(chunks)
}

// chunk is one piece of a document and what the merge needs to know of it.
type chunk struct {
	text string
	// headers holds the chunk's header lines (from the scanner).
	headers []header
	// arrays holds the paths of its [[A]] headers; tables the paths of
	// its [T] headers and every strict prefix of any of its header paths;
	// parents the strict prefixes alone.
	arrays, tables, parents map[string]bool

	m   map[string]any
	md  toml.MetaData
	err error
	// shape holds the key paths (toml.Key) that hold a table somewhere in
	// m, array elements being transparent (as in the parser's key paths).
	shape map[string]toml.Key
}

// decodeAll decodes every chunk, workers at a time.
func decodeAll(chunks []*chunk, workers int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for _, c := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.decode()
		})
	}
	wg.Wait()
}

// decode decodes the chunk alone and records its shape. A panic of the
// decoder becomes the chunk's error: the serial decode then meets it in
// the caller's goroutine, as it did before chunks.
func (c *chunk) decode() {
	defer func() {
		if r := recover(); r != nil {
			c.err = fmt.Errorf("decode chunk: panic: %v", r)
		}
	}()
	c.md, c.err = toml.Decode(c.text, &c.m)
	if c.err != nil {
		return
	}
	// The walk visits every table (about one per ten keys): a trie of
	// key parts keeps it free of allocations; its few nodes are listed
	// after.
	root := &shapeNode{}
	root.walk(c.m)
	c.shape = map[string]toml.Key{}
	root.list(nil, c.shape)
}

// shapeNode is a node of the trie of key paths that hold tables.
type shapeNode struct {
	table    bool
	children map[string]*shapeNode
}

// walk records v, found at the node's path, and what it holds.
func (n *shapeNode) walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		n.table = true
		for k, sub := range v {
			switch sub.(type) {
			case map[string]any, []map[string]any, []any:
				c := n.children[k]
				if c == nil {
					if n.children == nil {
						n.children = map[string]*shapeNode{}
					}
					c = &shapeNode{}
					n.children[k] = c
				}
				c.walk(sub)
			}
		}
	case []map[string]any:
		for _, e := range v {
			n.walk(e)
		}
	case []any:
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any:
				n.walk(e)
			}
		}
	}
}

// list adds the paths of the trie's tables to out, by toml.Key string.
func (n *shapeNode) list(path toml.Key, out map[string]toml.Key) {
	if n.table {
		k := append(toml.Key(nil), path...)
		out[k.String()] = k
	}
	for name, c := range n.children {
		c.list(append(path[:len(path):len(path)], name), out)
	}
}

// index fills the chunk's header path sets.
func (c *chunk) index() {
	c.arrays, c.tables, c.parents = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, h := range c.headers {
		if h.array {
			c.arrays[h.path] = true
		} else {
			c.tables[h.path] = true
		}
		for i := range len(h.path) {
			if h.path[i] == '.' {
				c.parents[h.path[:i]] = true
				c.tables[h.path[:i]] = true
			}
		}
	}
}

// merger merges chunks, in order, into the first one's map.
type merger struct {
	// splits holds the split paths S.
	splits map[string]bool
	// arrays and tables are the union of the merged chunks' sets.
	arrays, tables map[string]bool
	// typedArray holds the key paths an earlier chunk left typed Array.
	typedArray map[string]bool
	// later is the chunk being merged.
	later *chunk
}

// mergeChunks merges the decoded chunks; ok is false when any chunk failed
// or the merge cannot prove the result equal to the serial decode's.
func mergeChunks(chunks []*chunk) (map[string]any, bool) {
	for _, c := range chunks {
		if c.err != nil {
			return nil, false
		}
		c.index()
	}
	mg := &merger{splits: splitPaths(chunks), arrays: map[string]bool{}, tables: map[string]bool{}, typedArray: map[string]bool{}}
	// Every path holding a table in some chunk, and which chunks typed it
	// Array (keyInfo: the last type the chunk gave the path).
	shape := map[string]toml.Key{}
	for _, c := range chunks {
		for s, k := range c.shape {
			shape[s] = k
		}
	}
	dst := chunks[0].m
	for i, c := range chunks {
		if i > 0 {
			for s := range c.shape {
				if mg.typedArray[s] {
					return nil, false
				}
			}
			mg.later = c
			if !mg.merge(dst, c.m, nil) {
				return nil, false
			}
		}
		for s := range c.arrays {
			mg.arrays[s] = true
		}
		for s := range c.tables {
			mg.tables[s] = true
		}
		for s, k := range shape {
			if c.md.Type(k...) == "Array" {
				mg.typedArray[s] = true
			}
		}
	}
	return dst, true
}

// merge merges src (the later chunk's table at path) into dst.
func (mg *merger) merge(dst, src map[string]any, path toml.Key) bool {
	for k, sv := range src {
		dv, ok := dst[k]
		if !ok {
			dst[k] = sv
			continue
		}
		p := append(path[:len(path):len(path)], k)
		s := p.String()
		switch d := dv.(type) {
		case map[string]any:
			sm, ok := sv.(map[string]any)
			if !ok || mg.later.md.Type(p...) != "" || !mg.later.parents[s] || !mg.tables[s] {
				return false
			}
			if !mg.merge(d, sm, p) {
				return false
			}
		case []map[string]any:
			sa, ok := sv.([]map[string]any)
			if !ok || !mg.splits[s] || !mg.arrays[s] || !mg.later.arrays[s] {
				return false
			}
			dst[k] = append(d, sa...)
		default:
			return false
		}
	}
	return true
}

// splitPaths returns the split paths S: the paths P of [[P]] headers no
// strict prefix of which is itself a [[...]] header path.
func splitPaths(chunks []*chunk) map[string]bool {
	arrays := map[string]bool{}
	for _, c := range chunks {
		for _, h := range c.headers {
			if h.array {
				arrays[h.path] = true
			}
		}
	}
	return splitSet(arrays)
}

// splitSet returns the members of arrays no strict prefix of which is a
// member.
func splitSet(arrays map[string]bool) map[string]bool {
	s := map[string]bool{}
	for p := range arrays {
		ok := true
		for i := range len(p) {
			if p[i] == '.' && arrays[p[:i]] {
				ok = false
				break
			}
		}
		if ok {
			s[p] = true
		}
	}
	return s
}

// planChunks cuts doc at [[P]] header lines of split paths P, each chunk
// (but the last) at least size bytes. It returns one chunk (or none) when
// doc cannot or need not be cut.
func planChunks(doc string, size int) []*chunk {
	headers, ok := scanHeaders(doc)
	if !ok {
		return nil
	}
	arrays := map[string]bool{}
	for _, h := range headers {
		if h.array {
			arrays[h.path] = true
		}
	}
	splits := splitSet(arrays)
	// Every cut must follow a line end (see "Why the merge is exact"),
	// whatever the scanner thought.
	for _, h := range headers {
		if h.off > 0 && doc[h.off-1] != '\n' && !(h.off == 3 && strings.HasPrefix(doc, bom)) {
			return nil
		}
	}
	var chunks []*chunk
	start, first := 0, 0
	for i, h := range headers {
		if !h.array || !splits[h.path] || h.off-start < size {
			continue
		}
		chunks = append(chunks, &chunk{text: doc[start:h.off], headers: headers[first:i]})
		start, first = h.off, i
	}
	return append(chunks, &chunk{text: doc[start:], headers: headers[first:]})
}

// bom is the UTF-8 byte order mark.
const bom = "\xef\xbb\xbf"

// header is a header line found by scanHeaders.
type header struct {
	// off is the offset of the start of its line.
	off int
	// path is its key path, bare keys joined by dots.
	path  string
	array bool
}

// scanHeaders returns the top-level header lines of doc: lines whose first
// non-blank byte is '[' outside strings, comments, arrays and inline
// tables. ok is false when some header is not a simple one (bare keys
// joined by dots, no blanks inside the brackets, then blanks and an
// optional comment).
func scanHeaders(doc string) (headers []header, ok bool) {
	n := len(doc)
	depth := 0
	lineStart := true
	i := 0
	if strings.HasPrefix(doc, bom) { // skipped by the parser
		i = 3
	}
	for i < n {
		if lineStart && depth == 0 {
			lineStart = false
			j := i
			for j < n && (doc[j] == ' ' || doc[j] == '\t') {
				j++
			}
			if j < n && doc[j] == '[' {
				h, end, ok := parseHeader(doc, j)
				if !ok {
					return nil, false
				}
				h.off = i
				headers = append(headers, h)
				i, lineStart = end, true
				continue
			}
			i = j
			continue
		}
		switch c := doc[i]; c {
		case '\n':
			i++
			lineStart = depth == 0
		case '#':
			for i < n && doc[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = skipValueString(doc, i)
		case '[', '{':
			depth++
			i++
		case ']', '}':
			if depth > 0 {
				depth--
			}
			i++
		default:
			i++
		}
	}
	return headers, true
}

// skipValueString returns the offset after the string (one- or
// multi-line) starting at doc[i], a quote. A one-line string also ends,
// unterminated, at a line end: such a document is broken, and a chunk
// that ends inside it fails to decode.
func skipValueString(doc string, i int) int {
	n := len(doc)
	q := doc[i]
	escapes := q == '"'
	multi := i+2 < n && doc[i+1] == q && doc[i+2] == q
	if multi {
		i += 3
	} else {
		i++
	}
	for i < n {
		switch c := doc[i]; {
		case c == '\\' && escapes:
			i += 2
		case c == q && !multi:
			return i + 1
		case c == q:
			r := 0
			for i < n && doc[i] == q {
				i++
				r++
			}
			if r >= 3 {
				return i
			}
		case c == '\n' && !multi:
			return i
		default:
			i++
		}
	}
	return n
}

// parseHeader parses the header line whose '[' is at doc[i], returning the
// header and the offset of the next line.
func parseHeader(doc string, i int) (h header, next int, ok bool) {
	n := len(doc)
	i++
	if i < n && doc[i] == '[' {
		h.array = true
		i++
	}
	start := i
	for {
		j := i
		for i < n && isBare(doc[i]) {
			i++
		}
		if i == j {
			return h, 0, false
		}
		if i < n && doc[i] == '.' {
			i++
			continue
		}
		break
	}
	h.path = doc[start:i]
	if i >= n || doc[i] != ']' {
		return h, 0, false
	}
	i++
	if h.array {
		if i >= n || doc[i] != ']' {
			return h, 0, false
		}
		i++
	}
	for i < n && (doc[i] == ' ' || doc[i] == '\t') {
		i++
	}
	if i < n && doc[i] == '#' {
		for i < n && doc[i] != '\n' {
			i++
		}
	}
	if i < n && doc[i] == '\r' {
		i++
	}
	if i < n && doc[i] != '\n' {
		return h, 0, false
	}
	if i < n {
		i++
	}
	return h, i, true
}
