package configs

import (
	"bytes"
	"strconv"

	"github.com/pelletier/go-toml/v2/unstable"
)

// lineIndex maps key paths ("resolver[2].address", "check.recursive") to the
// line where they first appear: the line of each [table] and [[array]]
// header (array elements counted) and of each top-level `key =`, as
// go-toml/v2's parser (unstable.Parser) places them. Keys inside inline
// tables and arrays are not indexed: lineOf gives them the line of their
// nearest enclosing key.
type lineIndex map[string]int

// scanLines builds the lineIndex of a TOML document. It never fails: a
// document the parser stops on keeps the lines before the stop.
func scanLines(data []byte) lineIndex {
	idx := lineIndex{}
	s := lineScanner{idx: idx, count: map[string]int{}, current: map[string]int{}}
	data = bytes.TrimPrefix(data, []byte(bom))
	var p unstable.Parser
	p.Reset(data)
	line, off := 1, 0
	var keys []string
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.Table && e.Kind != unstable.ArrayTable && e.Kind != unstable.KeyValue {
			continue
		}
		keys = keys[:0]
		it := e.Key()
		for it.Next() {
			k := it.Node()
			if len(keys) == 0 {
				// Expressions come in document order: count the
				// line ends since the last one.
				o := int(k.Raw.Offset)
				line += bytes.Count(data[off:o], []byte{'\n'})
				off = o
			}
			keys = append(keys, string(k.Data))
		}
		if len(keys) == 0 {
			continue
		}
		if e.Kind == unstable.KeyValue {
			s.keyval(line, keys)
		} else {
			s.header(line, keys, e.Kind == unstable.ArrayTable)
		}
	}
	return idx
}

// lineOf returns the line of path, or of its nearest enclosing key that has
// one, or 0.
func (idx lineIndex) lineOf(path string) int {
	for path != "" {
		if n, ok := idx[path]; ok {
			return n
		}
		path = parentPath(path)
	}
	return 0
}

// parentPath strips the last component of a key path: "a.b[2]" gives "a.b",
// "a.b" gives "a", "a" gives "". Quoted components are respected.
func parentPath(path string) string {
	cut := 0
	var quote byte
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.' || c == '[':
			cut = i
		}
	}
	return path[:cut]
}

// lineScanner follows the current table and the arrays of tables'
// elements through the document's expressions.
type lineScanner struct {
	idx     lineIndex
	table   string         // indexed path of the current table
	count   map[string]int // array-of-tables path -> occurrences so far
	current map[string]int // array-of-tables path -> index of the latest
}

func (s *lineScanner) record(path string, line int) {
	if _, ok := s.idx[path]; !ok {
		s.idx[path] = line
	}
}

// keyval handles a `key = value` expression on line n.
func (s *lineScanner) keyval(n int, keys []string) {
	path := s.table
	for _, k := range keys {
		path = s.resolveArray(joinKey(path, k))
		s.record(path, n)
	}
}

// header handles a [table] or [[array]] header on line n.
func (s *lineScanner) header(n int, keys []string, array bool) {
	path := ""
	for i, k := range keys {
		path = joinKey(path, k)
		if array && i == len(keys)-1 {
			c := s.count[path]
			s.count[path] = c + 1
			s.current[path] = c
			path += "[" + strconv.Itoa(c) + "]"
		} else {
			path = s.resolveArray(path)
		}
		s.record(path, n)
	}
	s.table = path
}

// resolveArray appends the current index when path names an array of tables.
func (s *lineScanner) resolveArray(path string) string {
	if c, ok := s.current[path]; ok {
		return path + "[" + strconv.Itoa(c) + "]"
	}
	return path
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// quoteKey returns k as a TOML key component, quoted when it is not bare.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		if !isBare(k[i]) {
			return strconv.Quote(k)
		}
	}
	return k
}

// joinKey appends one component to a key path.
func joinKey(path, k string) string {
	if path == "" {
		return quoteKey(k)
	}
	return path + "." + quoteKey(k)
}

// indexKey appends an array index to a key path.
func indexKey(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
