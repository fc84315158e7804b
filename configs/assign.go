package configs

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
)

// assigner stores a generic TOML value that the schema check (checker)
// accepted into the Go value it was checked against. It does what
// BurntSushi/toml's typed decode did for the types the schema allows
// (strings, ints, bools, Durations, structs, string-keyed maps, slices,
// pointers to them) without its bookkeeping of decoded keys: the schema
// check already names every key it does not know.
type assigner struct {
	// index caches, per struct type, each TOML key's field index path.
	index map[reflect.Type]map[string][]int
}

// textUnmarshaler is the type of encoding.TextUnmarshaler.
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// assign stores v into rv (settable).
func (a *assigner) assign(v any, rv reflect.Value) error {
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		rv = rv.Elem()
	}
	if reflect.PointerTo(rv.Type()).Implements(textUnmarshaler) {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		return rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch rv.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		rv.SetString(s)
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		if rv.OverflowInt(n) {
			return fmt.Errorf("%d is out of range for %s", n, rv.Type())
		}
		rv.SetInt(n)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		rv.SetBool(b)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		idx := a.fields(rv.Type())
		for k, e := range m {
			path, found := idx[k]
			if !found {
				continue // an unknown key: the schema check reported it
			}
			if err := a.assign(e, rv.FieldByIndex(path)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMapWithSize(rv.Type(), len(m)))
		}
		for k, e := range m {
			ev := reflect.New(rv.Type().Elem()).Elem()
			if err := a.assign(e, ev); err != nil {
				return err
			}
			rv.SetMapIndex(reflect.ValueOf(k).Convert(rv.Type().Key()), ev)
		}
	case reflect.Slice:
		switch s := v.(type) {
		case []any:
			a.grow(rv, len(s))
			for i, e := range s {
				if err := a.assign(e, rv.Index(i)); err != nil {
					return err
				}
			}
		case []map[string]any:
			a.grow(rv, len(s))
			for i, e := range s {
				if err := a.assign(e, rv.Index(i)); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("cannot decode %T into %s", v, rv.Type())
		}
	default:
		return fmt.Errorf("unsupported type %s", rv.Type())
	}
	return nil
}

// grow makes slice rv n long (a new slice, as the TOML decoder made,
// when it is nil or too short).
func (a *assigner) grow(rv reflect.Value, n int) {
	if rv.IsNil() || rv.Cap() < n {
		rv.Set(reflect.MakeSlice(rv.Type(), n, n))
	}
	rv.SetLen(n)
}

// fields returns the field index path of each TOML key of struct type t
// (the keys of fields, embedded structs flattened).
func (a *assigner) fields(t reflect.Type) map[string][]int {
	if m, ok := a.index[t]; ok {
		return m
	}
	m := map[string][]int{}
	addFields(m, t, nil)
	if a.index == nil {
		a.index = map[reflect.Type]map[string][]int{}
	}
	a.index[t] = m
	return m
}

// addFields adds the keys of struct type t, whose index path is prefix,
// to m (the schema check's fields too): an outer field wins over an
// embedded one, as in Go.
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
