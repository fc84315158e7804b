package main

import (
	"flag"
	"strings"
)

// parseInterleaved parses args with fs allowing flags after positional
// arguments (flag.Parse stops at the first non-flag): it parses, takes one
// positional argument, and parses the rest again. Everything after a "--"
// is positional. It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if terminated(fs, args[:len(args)-len(rest)]) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// terminated reports whether fs.Parse, consuming consumed, stopped at a
// "--" terminator (rather than at a non-flag), following the flag
// package's rules: "-name=value" and boolean flags take one argument,
// other flags two.
func terminated(fs *flag.FlagSet, consumed []string) bool {
	for i := 0; i < len(consumed); i++ {
		a := consumed[i]
		if a == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBool(f) {
			i++ // the flag's value
		}
	}
	return false
}

// isBool reports whether f is a boolean flag (it takes no value argument).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
