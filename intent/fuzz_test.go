package intent

import (
	"bytes"
	"testing"
)

// FuzzParse: the file parser never panics, and whatever it accepts is
// written back by Marshal in a form it reads again to the same bytes. The
// seed corpus (testdata/fuzz/FuzzParse) holds the v1 golden files.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse(b)
		if err != nil {
			return
		}
		out, err := Marshal(st)
		if err != nil {
			t.Fatalf("Parse accepted what Marshal cannot write: %v\n%q", err, b)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse refused what Marshal wrote: %v\n%s", err, out)
		}
		out2, err := Marshal(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\nthen:\n%s (%v)", out, out2, err)
		}
	})
}
