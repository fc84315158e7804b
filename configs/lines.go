package configs

import (
	"strconv"
	"strings"
)

// lineIndex maps key paths ("resolver[2].address", "check.recursive") to the
// line where they first appear. BurntSushi/toml does not export key
// positions, so a small scanner finds them: it follows [table] and [[array]]
// headers (counting array occurrences) and `key =` lines, and skips over
// multi-line strings and arrays. It never fails; what it cannot follow it
// leaves out, and lineOf falls back to the nearest enclosing key.
type lineIndex map[string]int

// scanLines builds the lineIndex of a TOML document.
func scanLines(data []byte) lineIndex {
	idx := lineIndex{}
	s := lineScanner{idx: idx, count: map[string]int{}, current: map[string]int{}}
	for n, line := range strings.Split(string(data), "\n") {
		s.line(n+1, strings.TrimSuffix(line, "\r"))
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

type lineScanner struct {
	idx     lineIndex
	table   string         // indexed path of the current table
	count   map[string]int // array-of-tables path -> occurrences so far
	current map[string]int // array-of-tables path -> index of the latest
	inStr   byte           // '"' or '\'' inside a multi-line string
	depth   int            // open [ and { of a multi-line value
}

func (s *lineScanner) record(path string, line int) {
	if _, ok := s.idx[path]; !ok {
		s.idx[path] = line
	}
}

func (s *lineScanner) line(n int, text string) {
	if s.inStr != 0 || s.depth > 0 {
		s.value(text)
		return
	}
	t := strings.TrimLeft(text, " \t")
	if t == "" || t[0] == '#' {
		return
	}
	if t[0] == '[' {
		s.header(n, t)
		return
	}
	keys, rest, ok := parseKey(t, '=')
	if !ok {
		return
	}
	path := s.table
	for _, k := range keys {
		path = joinKey(path, k)
		path = s.resolveArray(path)
		s.record(path, n)
	}
	s.value(rest)
}

// header handles a [table] or [[array]] line.
func (s *lineScanner) header(n int, t string) {
	array := strings.HasPrefix(t, "[[")
	body := t[1:]
	if array {
		body = t[2:]
	}
	keys, _, ok := parseKey(body, ']')
	if !ok || len(keys) == 0 {
		return
	}
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

// value skips over a value, tracking multi-line strings and brackets.
func (s *lineScanner) value(t string) {
	for i := 0; i < len(t); {
		switch s.inStr {
		case '"':
			if t[i] == '\\' {
				i += 2
				continue
			}
			if strings.HasPrefix(t[i:], `"""`) {
				s.inStr = 0
				i += 3
				continue
			}
			i++
			continue
		case '\'':
			if strings.HasPrefix(t[i:], `'''`) {
				s.inStr = 0
				i += 3
				continue
			}
			i++
			continue
		}
		switch c := t[i]; c {
		case '#':
			return
		case '"', '\'':
			if strings.HasPrefix(t[i:], strings.Repeat(string(c), 3)) {
				s.inStr = c
				i += 3
				continue
			}
			i = skipString(t, i)
			continue
		case '[', '{':
			s.depth++
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		}
		i++
	}
}

// skipString returns the index after the one-line string starting at t[i].
func skipString(t string, i int) int {
	q := t[i]
	for i++; i < len(t); i++ {
		switch {
		case q == '"' && t[i] == '\\':
			i++
		case t[i] == q:
			return i + 1
		}
	}
	return len(t)
}

// parseKey parses a dotted key up to the end byte ('=' or ']') and returns
// its unquoted components and the text after the end byte.
func parseKey(t string, end byte) ([]string, string, bool) {
	var keys []string
	i := 0
	for {
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if i >= len(t) {
			return nil, "", false
		}
		switch c := t[i]; {
		case c == '"' || c == '\'':
			j := skipString(t, i)
			raw := t[i:j]
			k := strings.Trim(raw, string(c))
			if c == '"' {
				if u, err := strconv.Unquote(raw); err == nil {
					k = u
				}
			}
			keys = append(keys, k)
			i = j
		case isBare(c):
			j := i
			for j < len(t) && isBare(t[j]) {
				j++
			}
			keys = append(keys, t[i:j])
			i = j
		default:
			return nil, "", false
		}
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if i >= len(t) {
			return nil, "", false
		}
		switch t[i] {
		case '.':
			i++
		case end:
			return keys, t[i+1:], true
		default:
			return nil, "", false
		}
	}
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
