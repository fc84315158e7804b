package vip

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ownedFormat is one of the files of what the daemon owns, for
// TestOwnedFilesAgree: its list's key, two good entries and a bad one,
// and its loader (the number of entries loaded, the error).
type ownedFormat struct {
	what, list, good, good2, bad string
	load                         func(path string) (int, error)
}

// TestOwnedFilesAgree: LoadOwned and LoadOwnedAddresses take the same
// damaged, partial or odd file alike (one reader, readOwnedFile): the same
// errors, an empty set on every error, duplicates listed once.
func TestOwnedFilesAgree(t *testing.T) {
	formats := []ownedFormat{
		{what: "owned services", list: "services", good: `"udp/192.0.2.1:53"`, good2: `"tcp/192.0.2.1:53"`, bad: `"nonsense"`,
			load: func(path string) (int, error) {
				s, err := LoadOwned(path)
				if s == nil {
					return -1, err
				}
				return len(s.Keys()), err
			}},
		{what: "owned addresses", list: "addresses", good: `{"interface": "lo", "address": "192.0.2.1"}`, good2: `{"interface": "lo", "address": "2001:db8::1"}`, bad: `{"interface": "lo", "address": "192.0.2.300"}`,
			load: func(path string) (int, error) {
				s, err := LoadOwnedAddresses(path)
				if s == nil {
					return -1, err
				}
				return len(s.List()), err
			}},
	}
	for _, tc := range []struct {
		name string
		body func(f ownedFormat) string // nil: no file
		n    int                        // entries loaded
		err  string                     // "" for none
	}{
		{name: "missing", n: 0},
		{name: "empty list", body: func(f ownedFormat) string { return `{"version": 1, "` + f.list + `": []}` }, n: 0},
		{name: "null list", body: func(f ownedFormat) string { return `{"version": 1, "` + f.list + `": null}` }, n: 0},
		{name: "two entries", body: func(f ownedFormat) string {
			return `{"version": 1, "` + f.list + `": [` + f.good + `, ` + f.good2 + `]}`
		}, n: 2},
		{name: "duplicate", body: func(f ownedFormat) string {
			return `{"version": 1, "` + f.list + `": [` + f.good + `, ` + f.good + `]}`
		}, n: 1},
		{name: "empty file", body: func(ownedFormat) string { return "" }, err: "EOF"},
		{name: "not json", body: func(ownedFormat) string { return "{" }, err: "unexpected EOF"},
		{name: "truncated", body: func(f ownedFormat) string { return `{"version": 1, "` + f.list + `": [` + f.good }, err: "unexpected EOF"},
		{name: "unknown key", body: func(f ownedFormat) string { return `{"version": 1, "owner": "x", "` + f.list + `": []}` }, err: `unknown field "owner"`},
		{name: "other version", body: func(f ownedFormat) string { return `{"version": 2, "` + f.list + `": [` + f.good + `]}` }, err: "version 2, want 1"},
		{name: "no version", body: func(f ownedFormat) string { return `{"` + f.list + `": [` + f.good + `]}` }, err: "version 0, want 1"},
		{name: "two records", body: func(f ownedFormat) string {
			return `{"version": 1, "` + f.list + `": []} {"version": 1, "` + f.list + `": []}`
		}, err: "data after the record"},
		{name: "trailing bracket", body: func(f ownedFormat) string { return `{"version": 1, "` + f.list + `": []}]` }, err: "data after the record"},
		{name: "a bad entry among good ones", body: func(f ownedFormat) string {
			return `{"version": 1, "` + f.list + `": [` + f.good + `, ` + f.bad + `, ` + f.good2 + `]}`
		}, err: "entry 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range formats {
				path := filepath.Join(t.TempDir(), "owned.json")
				if tc.body != nil {
					if err := os.WriteFile(path, []byte(tc.body(f)), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				n, err := f.load(path)
				switch {
				case tc.err == "" && err != nil:
					t.Errorf("%s: %v, want no error", f.what, err)
				case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), "vip: "+f.what+" "+path+": ") || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("%s: error %v, want one naming %s and %q", f.what, err, path, tc.err)
				}
				if n != tc.n {
					t.Errorf("%s: %d entries loaded, want %d", f.what, n, tc.n)
				}
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		for _, f := range formats {
			n, err := f.load(t.TempDir()) // a directory
			if err == nil || !strings.HasPrefix(err.Error(), "vip: "+f.what+": ") || n != 0 {
				t.Errorf("%s: %d entries, error %v; want none and an error", f.what, n, err)
			}
		}
	})
}
