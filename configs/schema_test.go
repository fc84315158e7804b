package configs

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestWalkMatchesTOMLDecode checks that the walker stores every example
// and test document that it accepts exactly as BurntSushi/toml's typed
// decode does.
func TestWalkMatchesTOMLDecode(t *testing.T) {
	files, err := filepath.Glob("*.toml")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := decodeTOML(data)
		if err != nil {
			continue
		}
		p := &problems{file: f, data: data}
		var got Config
		if !(walker{p}).store("", raw, reflect.ValueOf(&got).Elem()) || len(p.list) > 0 {
			continue
		}
		var want Config
		if _, err := toml.Decode(string(data), &want); err != nil {
			t.Errorf("%s: toml: %v", f, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: assigned\n%+v\nwant (toml)\n%+v", f, got, want)
		}
		compared++
	}
	if compared < 4 {
		t.Fatalf("compared %d documents, want at least the 4 examples", compared)
	}
	t.Logf("%d documents compared", compared)
}

// TestWalkKeyPaths checks the key paths the walker names: an empty key is
// a key (`daemon.""`), not an array index, and an element of an array is
// indexed.
func TestWalkKeyPaths(t *testing.T) {
	_, err := Parse([]byte("[daemon]\n\"\" = 1\n\n[[vip]]\nname = 1\n"), "k.toml")
	var keys []string
	for _, p := range Problems(err) {
		keys = append(keys, p.Key)
	}
	want := []string{`daemon.""`, "vip[0].name"}
	for _, k := range want {
		if !slices.Contains(keys, k) {
			t.Errorf("problems at %q, want one at %q", keys, k)
		}
	}
}
