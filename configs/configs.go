// Package configs holds the lbdnsd configuration schema and its loader: a
// strict TOML decode (unknown keys are errors), defaults, and validation that
// reports every problem at once, each with its file, line, key path and bad
// value. The example configs in this directory are its test fixtures.
package configs

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"

	"github.com/BurntSushi/toml"
)

// Load reads, decodes, defaults and validates the config file at path. Bad
// content gives an error holding one Problem per thing wrong (see Problems);
// messages name the file as path was given.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes, defaults and validates a config document. name is used in
// messages and as Config.Path. On error the Config is nil and the error
// joins (errors.Join) one Problem per thing wrong, sorted by line; a
// document accepted may carry warnings (Config.Warnings).
func Parse(data []byte, name string) (*Config, error) {
	return parse(data, name, true)
}

// parse is Parse; with split the [[gslb.name]] tables are decoded apart
// from the rest of the document (split.go), without it the whole
// document at once: the two give the same Config or the same error.
func parse(data []byte, name string, split bool) (*Config, error) {
	p := &problems{file: name, data: data}
	d := &decoder{p: p, cfg: &Config{Path: name}, checks: map[string]bool{}}
	// One parse, into the generic document (the names apart when they
	// can be); one walk of it checks it against the schema and stores
	// the typed values (a walker), so every key the schema does not know
	// is reported by the walk.
	var raw map[string]any
	if split {
		raw = d.decodeSplit(data)
	}
	if raw == nil {
		var err error
		if raw, err = decodeTOML(data); err != nil {
			p.syntax(err)
			return nil, p.err()
		}
	}
	d.decode(raw)
	raw = nil // the generic tables left are the decoder's (d.gslbRaw ...)
	d.defaults()
	d.cfg.buildIndex()
	d.validate()
	if len(p.list) > 0 {
		return nil, p.err()
	}
	byLine(p.warnings)
	d.cfg.Warnings = p.warnings
	return d.cfg, nil
}

// problems collects Problems of one file.
type problems struct {
	file string
	data []byte
	// lines is the line index of data, scanned at the first problem: a
	// sound document needs none.
	lines lineIndex
	list  []Problem
	// warnings are what is accepted but worth saying (Config.Warnings).
	warnings []Problem
	// known caches fields per struct type for the walker (tens of
	// thousands of tables share a few types).
	known map[reflect.Type]map[string]field
}

// add records a problem at key path key (its line is looked up).
func (p *problems) add(key, value, msg string) {
	p.list = append(p.list, Problem{File: p.file, Line: p.lineOf(key), Key: key, Value: value, Msg: msg})
}

// warn records a warning at key path key (its line is looked up): a key
// accepted that the operator should hear of.
func (p *problems) warn(key, value, msg string) {
	p.warnings = append(p.warnings, Problem{File: p.file, Line: p.lineOf(key), Key: key, Value: value, Msg: msg})
}

// lineOf returns the line of key path key (see lineIndex.lineOf).
func (p *problems) lineOf(key string) int {
	if p.lines == nil {
		p.lines = scanLines(p.data)
	}
	return p.lines.lineOf(key)
}

// syntax records a TOML syntax error.
func (p *problems) syntax(err error) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		p.list = append(p.list, Problem{File: p.file, Line: pe.Position.Line, Msg: "syntax error: " + pe.Message})
		return
	}
	p.list = append(p.list, Problem{File: p.file, Msg: fmt.Sprintf("decode: %v", err)})
}

// err returns the problems sorted by line (unknown lines last) and joined.
func (p *problems) err() error {
	byLine(p.list)
	errs := make([]error, len(p.list))
	for i, pr := range p.list {
		errs[i] = pr
	}
	return errors.Join(errs...)
}

// byLine sorts list by line, unknown lines last, keeping the order of
// those on one line.
func byLine(list []Problem) {
	sort.SliceStable(list, func(i, j int) bool {
		li, lj := list[i].Line, list[j].Line
		if li == 0 || lj == 0 {
			return lj == 0 && li != 0
		}
		return li < lj
	})
}

// decoder carries one Parse from the generic decoding to the typed Config.
type decoder struct {
	p   *problems
	cfg *Config

	// broken is set when some table was not decoded because of a problem.
	broken bool

	// present holds the top-level keys of the document.
	present map[string]bool

	daemonRaw, ipvsRaw map[string]any
	daemonOK, ipvsOK   bool
	prefetchRaw        map[string]any
	prefetchOK         bool
	gslbRaw            map[string]any
	gslbOK             bool
	// split holds the [[gslb.name]] tables decoded apart (decodeSplit),
	// until decodeGSLB takes them; names records what validation asks
	// of each name's table (the tables themselves are not kept).
	split *splitNames
	names []nameTable
	// intern holds one copy of what tables repeat (intern.go).
	intern                  interner
	fleetRaw                map[string]any
	fleetOK                 bool
	bgpRaw                  map[string]any // [bgp] (bgp.go)
	bgpOK                   bool
	floodRaw                map[string]any // [flood] (flood.go)
	floodOK                 bool
	actionsRaw              map[string]any // [actions] (actions.go)
	actionsOK               bool
	dnstapRaw               map[string]any // [dnstap] (dnstap.go)
	dnstapOK                bool
	vipRaw, poolRaw, resRaw []map[string]any
	// vipOK, poolOK, resOK and checks say which elements decoded cleanly
	// (only those are validated on their own).
	vipOK, poolOK, resOK []bool
	checks               map[string]bool
	checkRaw             map[string]map[string]any
	// moved names the checks with settings of their kind written directly
	// under [check.NAME] (reported by movedKeys).
	moved map[string]bool
}

// decode type-checks the generic document and decodes what is sound into
// d.cfg.
func (d *decoder) decode(raw map[string]any) {
	sections := map[string]reflect.Type{
		"daemon": nil, "ipvs": nil, "vip": nil, "pool": nil, "resolver": nil, "check": nil, "prefetch": nil, "gslb": nil, "fleet": nil,
		"bgp": nil, "flood": nil, "actions": nil, "dnstap": nil,
	}
	d.present = map[string]bool{}
	for _, k := range sortedKeys(raw) {
		d.present[k] = true
		if _, ok := sections[k]; !ok {
			d.p.add(quoteKey(k), "", "unknown key"+suggest(k, sections))
		}
	}
	d.daemonRaw, d.daemonOK = d.table("daemon", raw, &d.cfg.Daemon)
	d.ipvsRaw, d.ipvsOK = d.table("ipvs", raw, &d.cfg.IPVS)
	d.prefetchRaw, d.prefetchOK = d.table("prefetch", raw, &d.cfg.Prefetch)
	d.cfg.VIPs, d.vipRaw, d.vipOK = decodeArray[VIP](d, "vip", raw)
	d.cfg.Pools, d.poolRaw, d.poolOK = decodeArray[Pool](d, "pool", raw)
	d.cfg.Resolvers, d.resRaw, d.resOK = decodeArray[Resolver](d, "resolver", raw)
	for i := range d.cfg.VIPs {
		if !d.vipOK[i] {
			d.cfg.VIPs[i].Name, _ = d.vipRaw[i]["name"].(string)
		}
	}
	for i := range d.cfg.Pools {
		if !d.poolOK[i] {
			d.cfg.Pools[i].Name, _ = d.poolRaw[i]["name"].(string)
		}
	}
	for i := range d.cfg.Resolvers {
		if !d.resOK[i] {
			d.cfg.Resolvers[i].Name, _ = d.resRaw[i]["name"].(string)
		}
	}
	d.decodeChecks(raw)
	d.decodeGSLB(raw)
	d.decodeFleet(raw)
	d.decodeBGP(raw)
	d.floodRaw, d.floodOK = d.table("flood", raw, &d.cfg.Flood)
	d.decodeActions(raw)
	d.decodeDnstap(raw)
}

// table decodes the single table key into v; it returns the generic table
// and whether v was decoded cleanly (an absent table is clean).
func (d *decoder) table(key string, raw map[string]any, v any) (map[string]any, bool) {
	rv, present := raw[key]
	if !present {
		return map[string]any{}, true
	}
	m, ok := rv.(map[string]any)
	if !ok {
		d.p.add(key, scalarText(rv), fmt.Sprintf("must be a table ([%s]), not %s", key, tomlType(rv)))
		d.broken = true
		return map[string]any{}, false
	}
	return m, d.store(key, m, reflect.ValueOf(v).Elem())
}

// store walks the table m at key path key into rv (walker.store); a
// table that is not sound marks the document broken.
func (d *decoder) store(key string, m map[string]any, rv reflect.Value) bool {
	if (walker{d.p}).store(key, m, rv) {
		return true
	}
	d.broken = true
	return false
}

// decodeArray decodes the array of tables key into a slice of T, one element
// per table (elements that fail the schema check stay zero).
func decodeArray[T any](d *decoder, key string, raw map[string]any) ([]T, []map[string]any, []bool) {
	rv, present := raw[key]
	if !present {
		return nil, nil, nil
	}
	ms, ok := tables(rv)
	if !ok {
		d.p.add(key, scalarText(rv), fmt.Sprintf("must be an array of tables ([[%s]]), not %s", key, tomlType(rv)))
		d.broken = true
		return nil, nil, nil
	}
	out := make([]T, len(ms))
	oks := make([]bool, len(ms))
	for i, m := range ms {
		oks[i] = d.store(indexKey(key, i), m, reflect.ValueOf(&out[i]).Elem())
	}
	return out, ms, oks
}

// decodeChecks decodes the [check.NAME] profiles.
func (d *decoder) decodeChecks(raw map[string]any) {
	d.checkRaw = map[string]map[string]any{}
	rv, present := raw["check"]
	if !present {
		return
	}
	m, ok := rv.(map[string]any)
	if !ok {
		d.p.add("check", scalarText(rv), "must be a table of check profiles ([check.NAME]), not "+tomlType(rv))
		d.broken = true
		return
	}
	d.cfg.Checks = map[string]*Check{}
	for _, name := range sortedKeys(m) {
		path := joinKey("check", name)
		cm, ok := m[name].(map[string]any)
		if !ok {
			d.p.add(path, scalarText(m[name]), "must be a table ([check."+quoteKey(name)+"]), not "+tomlType(m[name]))
			d.broken = true
			continue
		}
		c := &Check{Name: name}
		d.cfg.Checks[name] = c
		d.checkRaw[name] = cm
		rest := d.movedKeys(name, cm)
		d.checks[name] = d.store(path, rest, reflect.ValueOf(c).Elem())
		c.Name = name // not a TOML key, and a table not sound is left zero
	}
}

// movedKeys reports every key of a kind's settings written directly under
// [check.NAME] (the layout before checks were typed by kind) with where it
// moved, and returns the table without them for the schema check. Such a
// check is not validated further (d.moved).
func (d *decoder) movedKeys(name string, cm map[string]any) map[string]any {
	kind, _ := cm["kind"].(string)
	if kind == "" {
		kind = DefaultCheckKind
	}
	common := fields(reflect.TypeFor[Check]())
	rest := make(map[string]any, len(cm))
	for _, k := range sortedKeys(cm) {
		owner := ""
		if _, ok := common[k]; !ok {
			owner = kindOwning(k, kind)
		}
		if owner == "" {
			rest[k] = cm[k]
			continue
		}
		if d.moved == nil {
			d.moved = map[string]bool{}
		}
		d.moved[name] = true
		sub := "[check." + quoteKey(name) + "." + owner + "]"
		d.p.add(joinKey(joinKey("check", name), k), scalarText(cm[k]),
			fmt.Sprintf("moved to %s: write %s = ... under that header", sub, k))
	}
	return rest
}

// kindOwning returns the kind whose settings have key k, preferring kind,
// or "".
func kindOwning(k, kind string) string {
	t := reflect.TypeFor[Check]()
	owner := ""
	for _, f := range kindFields() {
		if _, ok := fields(t.Field(f.index).Type.Elem())[k]; ok && (owner == "" || f.name == kind) {
			owner = f.name
		}
	}
	return owner
}
