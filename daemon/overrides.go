package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/internal/atomicfile"
	"lbdns/resolvers"
)

// overridesFile keeps the operator's overrides (lbctl drain/disable) in the
// state directory. It is written atomically on every change and read at
// start; a file that cannot be parsed stops the daemon, because an
// operator's "disable" must never be silently forgotten.
const overridesFile = "overrides.json"

// overridesVersion is the version of the overrides file's format.
const overridesVersion = 1

type overridesState struct {
	Version   int              `json:"version"`
	Overrides []storedOverride `json:"overrides"`
}

// storedOverride is one override as persisted.
type storedOverride struct {
	Resolver string    `json:"resolver"`
	Pool     string    `json:"pool,omitempty"`
	VIP      string    `json:"vip,omitempty"`
	Action   string    `json:"action"`
	Reason   string    `json:"reason,omitempty"`
	Set      time.Time `json:"set"`
	By       string    `json:"by,omitempty"`
}

func (o storedOverride) sameScope(p storedOverride) bool {
	return o.Resolver == p.Resolver && o.Pool == p.Pool && o.VIP == p.VIP
}

// scopeText describes the override's scope for messages.
func (o storedOverride) scopeText() string { return "in " + control.Scope(o.Pool, o.VIP) }

func (o storedOverride) rule() resolvers.Rule {
	r := resolvers.Rule{Resolver: o.Resolver, Pool: o.Pool, VIP: o.VIP}
	switch o.Action {
	case control.ActionDrain:
		r.Override = resolvers.Drain
	case control.ActionDisable:
		r.Override = resolvers.Disable
	}
	return r
}

// StateFileError is returned by New when a persisted state file cannot be
// read or parsed. The daemon does not start: the file holds operator
// intent. Options.DiscardBadState moves such a file aside instead.
type StateFileError struct {
	Path string
	Err  error
}

// Error names the file, the problem and the two ways out.
func (e *StateFileError) Error() string {
	return fmt.Sprintf("state file %s cannot be used: %v; it holds operator overrides (drain/disable) that must not be forgotten silently: "+
		"repair it, or start lbdnsd once with -discard-bad-state to move it aside (a copy is kept) and start without overrides", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *StateFileError) Unwrap() error { return e.Err }

// loadOverrides reads the overrides file. A missing file means no
// overrides. When the file is unusable and discard is set, it is renamed
// to PATH.bad-TIME (kept for the operator) and no overrides are loaded;
// the returned string is then the copy's path.
func loadOverrides(dir string, discard bool, now time.Time) ([]storedOverride, string, error) {
	path := filepath.Join(dir, overridesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	var list []storedOverride
	if err == nil {
		list, err = parseOverrides(b)
	}
	if err == nil {
		return list, "", nil
	}
	if !discard {
		return nil, "", &StateFileError{Path: path, Err: err}
	}
	kept := path + ".bad-" + now.UTC().Format("20060102T150405Z")
	if rerr := os.Rename(path, kept); rerr != nil {
		return nil, "", &StateFileError{Path: path, Err: fmt.Errorf("%w; moving it aside failed too: %w", err, rerr)}
	}
	return nil, kept, nil
}

// parseOverrides decodes the overrides file strictly and checks every
// entry.
func parseOverrides(b []byte) ([]storedOverride, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var st overridesState
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse: data after the JSON object")
	}
	if st.Version != overridesVersion {
		return nil, fmt.Errorf("version %d is not %d (a file written by another lbdnsd version?)", st.Version, overridesVersion)
	}
	for i, o := range st.Overrides {
		switch {
		case o.Resolver == "":
			return nil, fmt.Errorf("overrides[%d]: resolver missing", i)
		case o.Action != control.ActionDrain && o.Action != control.ActionDisable:
			return nil, fmt.Errorf("overrides[%d]: action %q is not drain or disable", i, o.Action)
		case o.Pool != "" && o.VIP != "":
			return nil, fmt.Errorf("overrides[%d]: both pool and vip are set", i)
		}
		for _, p := range st.Overrides[:i] {
			if p.sameScope(o) {
				return nil, fmt.Errorf("overrides[%d]: a second override of %s %s", i, o.Resolver, o.scopeText())
			}
		}
	}
	return st.Overrides, nil
}

// saveOverrides persists list atomically.
func saveOverrides(dir string, list []storedOverride) error {
	if list == nil {
		list = []storedOverride{}
	}
	b, err := json.MarshalIndent(overridesState{Version: overridesVersion, Overrides: list}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, overridesFile), append(b, '\n'))
}

// rules turns the overrides into the pool policy's rules.
func rules(list []storedOverride) []resolvers.Rule {
	out := make([]resolvers.Rule, 0, len(list))
	for _, o := range list {
		out = append(out, o.rule())
	}
	return out
}

// orphaned reports why o no longer matches the configuration ("" when it
// still does): its resolver, pool or VIP was removed, or the resolver is no
// longer a member of the pool it is scoped to.
func orphaned(cfg *configs.Config, o storedOverride) string {
	if cfg.Resolver(o.Resolver) == nil {
		return "resolver " + o.Resolver + " is not in the configuration"
	}
	pool := o.Pool
	if o.VIP != "" {
		v := cfg.VIP(o.VIP)
		if v == nil {
			return "VIP " + o.VIP + " is not in the configuration"
		}
		pool = v.Pool
	}
	if pool != "" {
		p := cfg.Pool(pool)
		if p == nil {
			return "pool " + pool + " is not in the configuration"
		}
		if !slices.Contains(p.Members, o.Resolver) {
			return "resolver " + o.Resolver + " is not a member of pool " + pool
		}
	}
	return ""
}
