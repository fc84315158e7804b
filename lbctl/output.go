package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// format is the value of -o.
type format string

// Output formats.
const (
	formatTable format = "table"
	formatJSON  format = "json"
)

// String returns the format's name.
func (f *format) String() string {
	if f == nil {
		return ""
	}
	return string(*f)
}

// Set accepts "table" or "json".
func (f *format) Set(s string) error {
	switch format(s) {
	case formatTable, formatJSON:
		*f = format(s)
		return nil
	}
	return errors.New(`must be "table" or "json"`)
}

// writeJSON writes v to stdout as indented JSON.
func (e *env) writeJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// compact formats d for a table: "45s", "3m12s", "2h5m", "3d4h".
func compact(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

// timeLayout formats timestamps in tables (local time).
const timeLayout = "2006-01-02 15:04:05"

// stamp formats t for a table, "-" when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(timeLayout)
}

// dash returns s, or "-" when s is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to at most n runes on one line, marking a cut with
// "…". A cut falls between words (after the last whole word that fits),
// never inside one, unless the first word alone is longer than n.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	for i := n; i > 0; i-- {
		if r[i] != ' ' {
			continue
		}
		if cut := strings.TrimRight(string(r[:i]), " ,;:") + " …"; utf8.RuneCountInString(cut) <= n {
			return cut
		}
	}
	return string(r[:n-1]) + "…"
}
