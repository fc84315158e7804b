package configs

import (
	"bytes"
	"time"

	"github.com/BurntSushi/toml"
	gotoml "github.com/pelletier/go-toml/v2"
)

// The TOML decode.
//
// pelletier/go-toml/v2 parses the document into its generic map: five
// to seven times as fast as BurntSushi/toml (serial or in chunks on two
// cores) on the big reload's 5 MB document, on one core (bench/README.md,
// "2026-12-01: the TOML decode by go-toml/v2"). A document it rejects is decoded again by
// BurntSushi/toml, whose error is the one reported: its messages name
// what was wrong with the value ("Invalid float value: "192.0.2.53""),
// where go-toml/v2 names the byte it stopped at ("expected newline but
// got U+002E '.'"), and every syntax error's text and line stay as they
// were. A document BurntSushi accepts after go-toml/v2 rejected it is
// taken with BurntSushi's value; the two agree on every document both
// accept (decode_test.go and FuzzDecode compare them).

// decodeTOML decodes a TOML document into its generic map (tables as
// map[string]any, arrays of tables as []map[string]any, other arrays as
// []any, integers as
// int64, floats as float64, date-times as time.Time or go-toml/v2's
// local date and time types).
func decodeTOML(data []byte) (map[string]any, error) {
	var raw map[string]any
	if err := gotoml.Unmarshal(bytes.TrimPrefix(data, []byte(bom)), &raw); err == nil {
		if raw == nil {
			raw = map[string]any{}
		}
		tablesIn(raw)
		return raw, nil
	}
	return decodeBurntSushi(data)
}

// tablesIn makes every array of tables under m a []map[string]any, as
// BurntSushi/toml gives [[P]] arrays (go-toml/v2 gives []any): the
// validation takes the elements of an array of tables (tables) once per
// element in places, which must not copy the array each time.
func tablesIn(m map[string]any) {
	for k, v := range m {
		if t := tablesOf(v); t != nil {
			m[k] = t
		}
	}
}

// tablesOf returns v with the arrays of tables under it made
// []map[string]any, or nil when v holds none (v is then unchanged).
func tablesOf(v any) any {
	switch v := v.(type) {
	case map[string]any:
		tablesIn(v)
	case []any:
		ms := make([]map[string]any, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				ms = nil
				break
			}
			ms[i] = m
		}
		if len(ms) == 0 {
			for i, e := range v {
				if t := tablesOf(e); t != nil {
					v[i] = t
				}
			}
			return nil
		}
		for _, m := range ms {
			tablesIn(m)
		}
		return ms
	}
	return nil
}

// decodeBurntSushi is BurntSushi/toml's decode of the whole document.
func decodeBurntSushi(data []byte) (map[string]any, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// bom is the UTF-8 byte order mark, which BurntSushi/toml skips and
// go-toml/v2 rejects.
const bom = "\xef\xbb\xbf"

// asTime returns a TOML date-time value as a time.Time, go-toml/v2's
// local types in the zones BurntSushi/toml gives them (so that their text
// in messages is the same whichever decoder read them), and false for
// other values.
func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, true
	case gotoml.LocalDateTime:
		return t.AsTime(time.FixedZone("datetime-local", 0)), true
	case gotoml.LocalDate:
		return t.AsTime(time.FixedZone("date-local", 0)), true
	case gotoml.LocalTime:
		return time.Date(0, 1, 1, t.Hour, t.Minute, t.Second, t.Nanosecond, time.FixedZone("time-local", 0)), true
	}
	return time.Time{}, false
}
