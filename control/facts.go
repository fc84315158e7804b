package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Fact is one fact of a monitor's kind found by its last probe: an https
// monitor's certificate days left, an icmp monitor's echo loss. Status,
// lbctl and the page carry it by its name without knowing the kind.
type Fact struct {
	// Name is the fact's key in the monitor's JSON object
	// ("cert_days_left").
	Name string
	// Value is a number fact's value; Text a text fact's ("raw"), ""
	// for a number.
	Value float64
	Text  string
}

// Fact returns the fact of m named name, and whether m has one.
func (m GSLBMonitor) Fact(name string) (Fact, bool) {
	for _, f := range m.Facts {
		if f.Name == name {
			return f, true
		}
	}
	return Fact{}, false
}

// Format returns the fact's value as the tables show it: a text fact's
// text, a number in its shortest form ("41", "33.333333333333336").
func (f Fact) Format() string {
	if f.Text != "" {
		return f.Text
	}
	return strconv.FormatFloat(f.Value, 'f', -1, 64)
}

// FactColumn is one column of the monitor tables of lbctl and the status
// page: the fact named Fact of each monitor that has it.
type FactColumn struct {
	Fact string
	// Header is lbctl's column header, Title the page's.
	Header, Title string
	// Unit follows the value in lbctl ("%").
	Unit string
	// Text is true for a text fact (the page aligns numbers right).
	Text bool
	// BadBelowZero shows a negative value as bad on the page (an
	// expired certificate).
	BadBelowZero bool
}

// FactColumns returns the fact columns of the monitor tables, in order:
// a kind's new fact is shown by a row here.
func FactColumns() []FactColumn {
	return []FactColumn{
		{Fact: "cert_days_left", Header: "CERT DAYS", Title: "cert days left", BadBelowZero: true},
		{Fact: "loss_percent", Header: "LOSS", Title: "ICMP loss %", Unit: "%"},
		{Fact: "socket", Header: "SOCKET", Title: "ICMP socket", Text: true},
	}
}

// gslbMonitorFields is GSLBMonitor without its methods (for the JSON of
// its fields).
type gslbMonitorFields GSLBMonitor

// MarshalJSON writes the monitor's fields, then each fact as a key of the
// same object: a number, or a string for a text fact.
func (m GSLBMonitor) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(gslbMonitorFields(m))
	if err != nil || len(m.Facts) == 0 {
		return b, err
	}
	facts := append([]Fact(nil), m.Facts...)
	sort.SliceStable(facts, func(i, j int) bool { return facts[i].Name < facts[j].Name })
	out := b[:len(b)-1] // without the closing brace
	for _, f := range facts {
		var v any = f.Value
		if f.Text != "" {
			v = f.Text
		}
		k, _ := json.Marshal(f.Name)
		fv, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("fact %s: %w", f.Name, err)
		}
		out = append(append(append(append(out, ','), k...), ':'), fv...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON wrote: the keys that are not
// fields of GSLBMonitor are its facts.
func (m *GSLBMonitor) UnmarshalJSON(b []byte) error {
	var f gslbMonitorFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	known := jsonKeys(reflect.TypeFor[gslbMonitorFields]())
	f.Facts = nil
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if known[k] {
			continue
		}
		fact := Fact{Name: k}
		if err := json.Unmarshal(all[k], &fact.Value); err != nil {
			if err := json.Unmarshal(all[k], &fact.Text); err != nil {
				return fmt.Errorf("fact %s: neither a number nor a string", k)
			}
		}
		f.Facts = append(f.Facts, fact)
	}
	*m = GSLBMonitor(f)
	return nil
}

// jsonKeys returns the JSON keys of struct type t's fields.
func jsonKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		out[name] = true
	}
	return out
}
