package configs

import (
	"encoding/json"
	"reflect"
	"strings"
)

// CheckKinds returns the check kinds, the names of Check's sub-table
// fields ([check.NAME.KIND]), in field order.
func CheckKinds() []string {
	var out []string
	for _, f := range kindFields() {
		out = append(out, f.name)
	}
	return out
}

// kindField is one sub-table field of Check.
type kindField struct {
	name  string
	index int
}

// kindFields lists Check's fields that hold a kind's settings: pointers to
// structs with a toml name.
func kindFields() []kindField {
	t := reflect.TypeFor[Check]()
	var out []kindField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		out = append(out, kindField{name: name, index: i})
	}
	return out
}

// Spec returns the settings of c's kind (a *DNSCheck for "dns"), or nil
// when c has none.
func (c *Check) Spec() any {
	if c == nil {
		return nil
	}
	v := reflect.ValueOf(c).Elem()
	for _, f := range kindFields() {
		if f.name == c.Kind {
			fv := v.Field(f.index)
			if fv.IsNil() {
				return nil
			}
			return fv.Interface()
		}
	}
	return nil
}

// ProbeIdentity returns a comparable identity of what c's probe asks and
// how it judges the answer: its kind and the values of its kind's settings
// (SpecIdentity), without the pacing (interval, fast_interval, timeout,
// rise, fall). Two checks with the same identity gather the same facts,
// so a reload keeps a target's health when the identity is unchanged.
func (c *Check) ProbeIdentity() string {
	if c == nil {
		return ""
	}
	return c.Kind + " " + SpecIdentity(c.Spec())
}

// SpecIdentity returns the values of spec (a kind's settings struct, or a
// pointer to one) as canonical text: every exported field, by value
// (pointers followed), except those tagged `json:"-"`. A field added to a
// spec type takes part without any other edit.
func SpecIdentity(spec any) string {
	b, err := json.Marshal(spec)
	if err != nil {
		// Settings structs hold strings, numbers, bools, slices and
		// pointers to them, which always marshal.
		return "unencodable " + reflect.TypeOf(spec).String() + ": " + err.Error()
	}
	return string(b)
}
