package configs

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// walker checks the generic decoding of the document against the Go
// schema and stores what it accepts, in one walk: it finds unknown keys
// (exactly: BurntSushi/toml matched field names case-insensitively, so a
// key differing from a field only in case is an error) and values of the
// wrong TOML type, all of them and in a stable order, each with its indexed
// key path. Each Go type the schema allows is one case of value, its check
// and its store together: a new field type is one edit there.
type walker struct {
	p *problems
}

// field is one TOML key of a struct type: its field's index path and type.
type field struct {
	index []int
	typ   reflect.Type
}

// fields returns the TOML keys of a struct type (addFields), cached per
// type in p (tens of thousands of tables share a few types).
func (p *problems) fields(t reflect.Type) map[string]field {
	if m, ok := p.known[t]; ok {
		return m
	}
	m := fields(t)
	if p.known == nil {
		p.known = map[reflect.Type]map[string]field{}
	}
	p.known[t] = m
	return m
}

// fields returns the TOML keys of struct type t, embedded structs
// flattened.
func fields(t reflect.Type) map[string]field {
	idx := map[string][]int{}
	addFields(idx, t, nil)
	m := make(map[string]field, len(idx))
	for name, path := range idx {
		m[name] = field{index: path, typ: t.FieldByIndex(path).Type}
	}
	return m
}

// addFields adds the keys of struct type t, whose index path is prefix,
// to m: an outer field wins over an embedded one, as in Go.
func addFields(m map[string][]int, t reflect.Type, prefix []int) {
	var embedded []int
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, i)
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = append(append([]int(nil), prefix...), i)
	}
	for _, i := range embedded {
		sub := map[string][]int{}
		addFields(sub, t.Field(i).Type, append(append([]int(nil), prefix...), i))
		for k, p := range sub {
			if _, ok := m[k]; !ok {
				m[k] = p
			}
		}
	}
}

// store walks the table raw at path into rv, a struct. It reports whether
// the table was sound; when it was not, rv is left zero.
func (w walker) store(path string, raw map[string]any, rv reflect.Value) bool {
	if w.table(path, raw, rv) {
		return true
	}
	rv.SetZero()
	return false
}

// table walks one table into struct rv. It reports whether the table was
// sound (then rv holds all of it).
func (w walker) table(path string, raw map[string]any, rv reflect.Value) bool {
	known := w.p.fields(rv.Type())
	// The common case first (a reload of 50,000 members walks 60,000
	// tables): every key known and sound, walked in map order with no key
	// sorted. At the first thing wrong, what that pass reported is taken
	// back and the table walked again in key order, so that its problems
	// come in a stable order.
	mark := len(w.p.list)
	sound := true
	for k, v := range raw {
		f, found := known[k]
		if !found || !w.value(keyAt(path, k), v, rv.FieldByIndex(f.index)) {
			sound = false
			break
		}
	}
	if sound {
		return true
	}
	w.p.list = w.p.list[:mark]
	ok := true
	for _, k := range sortedKeys(raw) {
		f, found := known[k]
		if !found {
			w.p.add(joinKey(path, k), "", "unknown key"+suggest(k, known))
			for name := range known {
				if strings.EqualFold(name, k) {
					ok = false // the key was meant for field name
				}
			}
			continue
		}
		if !w.value(keyAt(path, k), raw[k], rv.FieldByIndex(f.index)) {
			ok = false
		}
	}
	return ok
}

// keyPath is the key path of a value, built only when a problem names it
// or a table below it is walked: its parent's path and its last
// component, a key (index < 0) or an array index.
type keyPath struct {
	parent string
	key    string
	index  int
}

// keyAt is the key path of key k of the table at parent.
func keyAt(parent, k string) keyPath { return keyPath{parent: parent, key: k, index: -1} }

// String returns the key path as messages show it.
func (k keyPath) String() string {
	if k.index >= 0 {
		return indexKey(k.parent, k.index)
	}
	return joinKey(k.parent, k.key)
}

// value walks one value at key path at into rv. It reports whether the
// value was sound; a problem is reported for each thing wrong.
func (w walker) value(at keyPath, v any, rv reflect.Value) bool {
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		rv = rv.Elem()
	}
	want := ""
	switch t := rv.Type(); {
	case t == reflect.TypeFor[Duration]():
		s, isStr := v.(string)
		if !isStr {
			want = "duration string"
			break
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			w.p.add(at.String(), s, `not a duration (write a number with a unit, such as "2s" or "500ms")`)
			return false
		}
		rv.Set(reflect.ValueOf(Duration{d}))
	case t.Kind() == reflect.String:
		s, isStr := v.(string)
		if !isStr {
			want = "string"
			break
		}
		rv.SetString(s)
	case t.Kind() == reflect.Int:
		n, isInt := v.(int64)
		if !isInt {
			want = "integer"
			break
		}
		if rv.OverflowInt(n) {
			w.p.add(at.String(), scalarText(v), fmt.Sprintf("out of range for %s", t))
			return false
		}
		rv.SetInt(n)
	case t.Kind() == reflect.Bool:
		b, isBool := v.(bool)
		if !isBool {
			want = "boolean"
			break
		}
		rv.SetBool(b)
	case t.Kind() == reflect.Struct:
		m, isTable := v.(map[string]any)
		if !isTable {
			want = "table"
			break
		}
		return w.table(at.String(), m, rv)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		m, isTable := v.(map[string]any)
		if !isTable {
			want = "table"
			break
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMapWithSize(t, len(m)))
		}
		path := at.String()
		ok := true
		for _, k := range sortedKeys(m) {
			ev := reflect.New(t.Elem()).Elem()
			ok = w.value(keyAt(path, k), m[k], ev) && ok
			rv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		return ok
	case t.Kind() == reflect.Slice:
		arr, isArr := v.([]any)
		if ms, isTables := v.([]map[string]any); isTables {
			arr, isArr = make([]any, len(ms)), true
			for i, m := range ms {
				arr[i] = m
			}
		}
		if !isArr {
			want = "array"
			break
		}
		if rv.IsNil() || rv.Cap() < len(arr) {
			rv.Set(reflect.MakeSlice(t, len(arr), len(arr)))
		}
		rv.SetLen(len(arr))
		path := at.String()
		ok := true
		for i, e := range arr {
			ok = w.value(keyPath{parent: path, index: i}, e, rv.Index(i)) && ok
		}
		return ok
	default:
		want = t.String()
	}
	if want == "" {
		return true
	}
	w.p.add(at.String(), scalarText(v), fmt.Sprintf("must be %s %s, not %s", article(want), want, tomlType(v)))
	return false
}

// tables returns the elements of an array of tables, or nil and false when
// v is not one.
func tables(v any) ([]map[string]any, bool) {
	switch a := v.(type) {
	case []map[string]any:
		return a, true
	case []any:
		out := make([]map[string]any, len(a))
		for i, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scalarText formats a scalar TOML value for a message; "" for tables and
// arrays.
func scalarText(v any) string {
	if t, ok := asTime(v); ok {
		return t.Format(time.RFC3339Nano)
	}
	switch x := v.(type) {
	case string:
		return x
	case int64, float64, bool:
		return fmt.Sprint(x)
	case fmt.Stringer:
		return x.String()
	}
	return ""
}

// tomlType names the TOML type of a generically decoded value.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "a date/time"
}

func article(s string) string {
	if strings.ContainsRune("aeiou", rune(s[0])) {
		return "an"
	}
	return "a"
}

// suggest returns ` (did you mean "x"?)` for the known key closest to k, or
// "" when none is close.
func suggest[V any](k string, known map[string]V) string {
	return Suggest(strings.ToLower(k), sortedKeys(known))
}

// Suggest returns ` (did you mean "x"?)` for the name in known closest to
// name (at most two edits away, the first of equals in known's order), or
// "" when none is close. Error messages about unknown names use it.
func Suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
