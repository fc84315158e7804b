package configs

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// checker walks the generic decoding of the document against the Go schema
// before the typed decode: it finds unknown keys (exactly: BurntSushi/toml
// matches field names case-insensitively) and values of the wrong TOML type,
// all of them and in a stable order, each with its indexed key path.
type checker struct {
	p *problems
}

// fields returns the TOML key names of a struct type and their types
// (the keys addFields finds).
func fields(t reflect.Type) map[string]reflect.Type {
	idx := map[string][]int{}
	addFields(idx, t, nil)
	m := make(map[string]reflect.Type, len(idx))
	for name, path := range idx {
		m[name] = t.FieldByIndex(path).Type
	}
	return m
}

// table checks one table against struct type t. It reports whether the
// table can be decoded into t without surprises.
func (c checker) table(path string, raw map[string]any, t reflect.Type) bool {
	ok := true
	known := c.p.known[t]
	if known == nil {
		known = fields(t)
		if c.p.known == nil {
			c.p.known = map[reflect.Type]map[string]reflect.Type{}
		}
		c.p.known[t] = known
	}
	if clean(raw, known) {
		return true // the common case: no key path built, no key sorted
	}
	for _, k := range sortedKeys(raw) {
		ft, found := known[k]
		if found && scalarOK(raw[k], ft) {
			continue // the common case, without building the key path
		}
		kp := joinKey(path, k)
		if !found {
			c.p.add(kp, "", "unknown key"+suggest(k, known))
			for name := range known {
				if strings.EqualFold(name, k) {
					ok = false // the decoder would use it for field name
				}
			}
			continue
		}
		if !c.value(kp, raw[k], ft) {
			ok = false
		}
	}
	return ok
}

// clean reports whether every key of raw is known with a scalar value of
// its type: then table has nothing to check further nor to report, and
// need not walk raw's keys in order (a reload of 50,000 members checks
// 60,000 such tables).
func clean(raw map[string]any, known map[string]reflect.Type) bool {
	for k, v := range raw {
		ft, found := known[k]
		if !found || !scalarOK(v, ft) {
			return false
		}
	}
	return true
}

// value checks one value against Go type t.
func (c checker) value(path string, v any, t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := ""
	switch {
	case t == reflect.TypeFor[Duration]():
		s, isStr := v.(string)
		if !isStr {
			want = "duration string"
			break
		}
		if _, err := time.ParseDuration(s); err != nil {
			c.p.add(path, s, `not a duration (write a number with a unit, such as "2s" or "500ms")`)
			return false
		}
		return true
	case t.Kind() == reflect.String:
		if _, isStr := v.(string); !isStr {
			want = "string"
		}
	case t.Kind() == reflect.Int:
		if _, isInt := v.(int64); !isInt {
			want = "integer"
		}
	case t.Kind() == reflect.Bool:
		if _, isBool := v.(bool); !isBool {
			want = "boolean"
		}
	case t.Kind() == reflect.Struct:
		m, isTable := v.(map[string]any)
		if !isTable {
			want = "table"
			break
		}
		return c.table(path, m, t)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		m, isTable := v.(map[string]any)
		if !isTable {
			want = "table"
			break
		}
		ok := true
		for _, k := range sortedKeys(m) {
			ok = c.value(joinKey(path, k), m[k], t.Elem()) && ok
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
		ok := true
		for i, e := range arr {
			if !scalarOK(e, t.Elem()) && !c.value(indexKey(path, i), e, t.Elem()) {
				ok = false
			}
		}
		return ok
	default:
		want = t.String()
	}
	if want == "" {
		return true
	}
	c.p.add(path, scalarText(v), fmt.Sprintf("must be %s %s, not %s", article(want), want, tomlType(v)))
	return false
}

// scalarOK reports whether v is a sound string, integer, boolean or
// duration of Go type t: what value accepts without a word. False leaves
// the check (and its messages) to value.
func scalarOK(v any, t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[Duration]():
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := time.ParseDuration(s)
		return err == nil
	case t.Kind() == reflect.String:
		_, ok := v.(string)
		return ok
	case t.Kind() == reflect.Int:
		_, ok := v.(int64)
		return ok
	case t.Kind() == reflect.Bool:
		_, ok := v.(bool)
		return ok
	}
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
func suggest(k string, known map[string]reflect.Type) string {
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
