package configs

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a config file. Parse and Load return every
// problem they find, each as a Problem, joined with errors.Join.
type Problem struct {
	// File is the file name as given to Parse or Load.
	File string
	// Line is the 1-based line the problem is on, or 0 when unknown.
	Line int
	// Key is the key path, such as "resolver[2].address" or
	// "check.recursive.timeout"; empty for a syntax error.
	Key string
	// Value is the offending value as text; empty when there is none (a
	// missing key, an unknown key).
	Value string
	// Msg says what is wrong.
	Msg string
}

// Error formats the problem as `FILE:LINE: KEY: value "VALUE": MSG`, leaving
// out the parts that are unknown or empty.
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	if p.Value != "" {
		fmt.Fprintf(&b, "value %q: ", p.Value)
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems returns every Problem inside err, in order (err as returned by
// Parse or Load). It returns nil when err holds no Problem, for example when
// the file could not be read.
func Problems(err error) []Problem {
	switch e := err.(type) {
	case nil:
		return nil
	case Problem:
		return []Problem{e}
	case interface{ Unwrap() []error }:
		var out []Problem
		for _, sub := range e.Unwrap() {
			out = append(out, Problems(sub)...)
		}
		return out
	case interface{ Unwrap() error }:
		return Problems(e.Unwrap())
	}
	return nil
}
