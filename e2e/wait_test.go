package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"lbdns/control"
	"lbdns/testkit/poll"
)

// waitTimeout bounds every wait for the daemon to reach a state.
const waitTimeout = 10 * time.Second

// waitStatus polls the daemon's status until cond holds and returns that
// status.
func (w *world) waitStatus(what string, cond func(*control.Status) (bool, string)) *control.Status {
	w.t.Helper()
	var last *control.Status
	poll.Until(w.t, waitTimeout, what, func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		last = st
		return cond(st)
	})
	return last
}

// waitUp waits until the daemon is warm and every named resolver is up
// with fresh facts in every pool it is a member of (all configured
// resolvers when no name is given).
func (w *world) waitUp(names ...string) *control.Status {
	w.t.Helper()
	if len(names) == 0 {
		for _, r := range w.layout.resolvers {
			names = append(names, r.name)
		}
	}
	return w.waitStatus(fmt.Sprintf("%v up", names), func(st *control.Status) (bool, string) {
		if !st.Daemon.Warm {
			return false, "daemon not warm"
		}
		seen := map[string]bool{}
		var states []string
		for _, p := range st.Pools {
			for _, m := range p.Members {
				states = append(states, fmt.Sprintf("%s/%s: %s fresh=%v", p.Name, m.Resolver, m.State, m.Fresh))
				if slices.Contains(names, m.Resolver) {
					if m.State != "up" || !m.Fresh {
						return false, strings.Join(states, "\n")
					}
					seen[m.Resolver] = true
				}
			}
		}
		return len(seen) == len(names), strings.Join(states, "\n")
	})
}

// ipvsTable is what the dry-run table file holds: service
// ("udp/192.0.2.53:53") → destination address → weight.
type ipvsTable map[string]map[string]uint32

func (tb ipvsTable) String() string {
	var b strings.Builder
	for _, svc := range slices.Sorted(maps.Keys(tb)) {
		fmt.Fprintf(&b, "%s\n", svc)
		for _, d := range slices.Sorted(maps.Keys(tb[svc])) {
			fmt.Fprintf(&b, "  -> %s %d\n", d, tb[svc][d])
		}
	}
	return b.String()
}

// equal reports whether the tables have the same services, destinations
// and weights.
func (tb ipvsTable) equal(other ipvsTable) bool {
	return maps.EqualFunc(tb, other, func(a, b map[string]uint32) bool { return maps.Equal(a, b) })
}

// dryRunTable is the path of the table the daemon would program.
func (w *world) dryRunTable() string { return filepath.Join(w.stateDir, "dry-run-table.txt") }

// readTable parses the dry-run table file (the format of
// vip.FormatTable); a missing file is a nil table.
func (w *world) readTable() (ipvsTable, error) {
	b, err := os.ReadFile(w.dryRunTable())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseTable(string(b))
}

// parseTable parses vip.FormatTable's output.
func parseTable(s string) (ipvsTable, error) {
	lines := strings.Split(s, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "# DRY RUN") {
		return nil, fmt.Errorf("dry-run table: no DRY RUN header:\n%s", s)
	}
	tb := ipvsTable{}
	var svc string
	for _, l := range lines[3:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case len(f) == 3 && (f[0] == "UDP" || f[0] == "TCP"):
			svc = strings.ToLower(f[0]) + "/" + f[1]
			tb[svc] = map[string]uint32{}
		case len(f) == 4 && f[0] == "->" && svc != "":
			wt, err := strconv.ParseUint(f[3], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("dry-run table: line %q: %w", l, err)
			}
			tb[svc][f[1]] = uint32(wt)
		default:
			return nil, fmt.Errorf("dry-run table: cannot parse line %q", l)
		}
	}
	return tb, nil
}

// wantTable is the table the layout gives when every resolver is up:
// UDP and TCP port 53 on every pool's VIP, one destination per member at
// its weight, weight 0 for the drained ones, none for the disabled ones.
func (w *world) wantTable(drained, disabled []string) ipvsTable {
	tb := ipvsTable{}
	for _, p := range w.layout.pools {
		for _, proto := range []string{"udp", "tcp"} {
			svc := proto + "/" + p.vipAddr + ":53"
			tb[svc] = map[string]uint32{}
			for _, m := range p.members {
				switch {
				case slices.Contains(disabled, m):
				case slices.Contains(drained, m):
					tb[svc][w.addr(m)] = 0
				default:
					tb[svc][w.addr(m)] = uint32(w.layout.resolver(m).weight)
				}
			}
		}
	}
	return tb
}

// waitTable waits until the dry-run table is want.
func (w *world) waitTable(what string, want ipvsTable) {
	w.t.Helper()
	poll.Until(w.t, waitTimeout, what, func() (bool, string) {
		tb, err := w.readTable()
		if err != nil {
			return false, err.Error()
		}
		return tb.equal(want), fmt.Sprintf("table:\n%swant:\n%s", tb, want)
	})
}

// startReady starts the daemon and waits until every resolver is up and
// the dry-run table has every one of them.
func (w *world) startReady(args ...string) *lbdnsd {
	w.t.Helper()
	d := w.start(args...)
	w.waitUp()
	w.waitTable("every back end in the table", w.wantTable(nil, nil))
	return d
}
