package configs

import (
	"encoding"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// exampleLine is a commented-out line of full.toml that is TOML to
// uncomment: a table header or a key = value, after "# ".
var exampleLine = regexp.MustCompile(`^# ?(\[\[?[a-z][a-z0-9_.]*\]\]?\s*(#.*)?|[A-Za-z][A-Za-z0-9_-]* *= .*)$`)

// uncommented returns the document with every commented-out example line
// made live.
func uncommented(doc string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if exampleLine.MatchString(l) {
			lines[i] = strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")
		}
	}
	return strings.Join(lines, "\n")
}

// schemaKeys returns every key path the configuration accepts, as
// "gslb.pool.member.address": tables of arrays and pointers are walked
// into, a map of tables named by the operator ([check.NAME]) is "*", and
// a value the decoder reads as text (durations, addresses) or a map of
// plain values (labels, headers) is one key.
func schemaKeys(t reflect.Type, prefix string, out map[string]bool) {
	text := reflect.TypeFor[encoding.TextUnmarshaler]()
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch {
	case reflect.PointerTo(t).Implements(text):
		out[prefix] = true
	case t.Kind() == reflect.Map && leafMap(t):
		out[prefix] = true
	case t.Kind() == reflect.Map:
		schemaKeys(t.Elem(), prefix+".*", out)
	case t.Kind() == reflect.Struct:
		for name, f := range fields(t) {
			schemaKeys(f.typ, strings.TrimPrefix(prefix+"."+name, "."), out)
		}
	default:
		out[prefix] = true
	}
}

// leafMap reports whether a map type holds plain values (one key of the
// schema) rather than tables.
func leafMap(t reflect.Type) bool {
	e := t.Elem()
	for e.Kind() == reflect.Pointer {
		e = e.Elem()
	}
	return e.Kind() != reflect.Struct
}

// docKeys adds the key paths of a decoded document v, read as schema
// type t says (a map of tables: its keys are "*"), to out.
func docKeys(v any, t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch v := v.(type) {
	case []map[string]any:
		for _, e := range v {
			docKeys(e, t, prefix, out)
		}
		return
	case map[string]any:
		if t.Kind() == reflect.Map && !leafMap(t) {
			for _, e := range v {
				docKeys(e, t.Elem(), prefix+".*", out)
			}
			return
		}
		if t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			fs := fields(t)
			for k, e := range v {
				key := strings.TrimPrefix(prefix+"."+k, ".")
				f, ok := fs[k]
				if !ok {
					out[key] = true // unknown: reported by the caller
					continue
				}
				docKeys(e, f.typ, key, out)
			}
			return
		}
	}
	out[prefix] = true
}

// notInFull are keys of the schema full.toml leaves out on purpose.
var notInFull = map[string]string{
	"gslb.server.reply_cache": "deprecated: accepted with a warning, has no effect",
}

// TestFullHasEveryKey: configs/full.toml, with its commented-out examples
// made live, names every key the configuration accepts (and no other),
// so that the reference the package installs as /etc/lbdns/lbdns.toml
// really is every key.
func TestFullHasEveryKey(t *testing.T) {
	b, err := os.ReadFile("full.toml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if _, err := toml.Decode(uncommented(string(b)), &doc); err != nil {
		t.Fatalf("full.toml with its examples uncommented is not TOML: %v", err)
	}
	cfgType := reflect.TypeFor[Config]()
	want, got := map[string]bool{}, map[string]bool{}
	schemaKeys(cfgType, "", want)
	docKeys(doc, cfgType, "", got)
	var missing, unknown []string
	for k := range want {
		if !got[k] && notInFull[k] == "" {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(unknown)
	if len(missing) > 0 {
		t.Errorf("full.toml lacks %d keys of the schema (add each, commented out where it must not be live):\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
	if len(unknown) > 0 {
		t.Errorf("full.toml has %d keys the schema does not know:\n  %s", len(unknown), strings.Join(unknown, "\n  "))
	}
	for k := range notInFull {
		if !want[k] {
			t.Errorf("notInFull names %s, which the schema does not have", k)
		}
	}
}

// TestSchemaKeysWalk: the walk finds keys of every shape the schema has
// (a plain key, a table, an array of tables, a map of named tables, a
// text value, a map of plain values), so a missing key cannot hide.
func TestSchemaKeysWalk(t *testing.T) {
	keys := map[string]bool{}
	schemaKeys(reflect.TypeFor[Config](), "", keys)
	for _, k := range []string{
		"daemon.state_dir",         // a plain key in a table
		"vip.address",              // an array of tables
		"check.*.interval",         // a map of named tables (a text value)
		"check.*.https.headers",    // a map of plain values
		"gslb.pool.member.address", // an array in an array
		"gslb.server.udp_size",     // a nested table
		"check.*.dns.qname",        // a pointer to a table in a map
		"actions.allow",            // an array of plain values
	} {
		if !keys[k] {
			t.Errorf("schema walk lacks %s", k)
		}
	}
	if keys["check.*.https.headers.X-Health-Probe"] || keys["check"] {
		t.Error("schema walk goes into a map of plain values, or stops at a map of tables")
	}
}
