package main

import (
	"flag"
	"io"
	"reflect"
	"testing"
)

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		pos     []string
		reason  string
		pool    string
		verbose bool
	}{
		{"flags first", []string{"--pool", "main", "bind-1"}, []string{"bind-1"}, "", "main", false},
		{"flags last", []string{"bind-1", "--reason", "disk full", "-pool=main"}, []string{"bind-1"}, "disk full", "main", false},
		{"mixed", []string{"a", "-v", "b", "--reason", "r", "c"}, []string{"a", "b", "c"}, "r", "", true},
		{"terminator", []string{"a", "--", "-v", "--pool"}, []string{"a", "-v", "--pool"}, "", "", false},
		{"dashes as a value", []string{"a", "--reason", "--", "b"}, []string{"a", "b"}, "--", "", false},
		{"flag as a value, then terminator", []string{"--reason", "--pool", "--", "-b"}, []string{"-b"}, "--pool", "", false},
		{"bool then terminator", []string{"-v", "--", "-x"}, []string{"-x"}, "", "", true},
		{"none", nil, nil, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			reason := fs.String("reason", "", "")
			pool := fs.String("pool", "", "")
			verbose := fs.Bool("v", false, "")
			pos, err := parseInterleaved(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pos, tc.pos) || *reason != tc.reason || *pool != tc.pool || *verbose != tc.verbose {
				t.Errorf("got pos %q reason %q pool %q v %v, want %q %q %q %v",
					pos, *reason, *pool, *verbose, tc.pos, tc.reason, tc.pool, tc.verbose)
			}
		})
	}
}
