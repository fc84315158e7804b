package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// result is how a command ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// commandTimeout bounds one lbctl run.
const commandTimeout = 30 * time.Second

// command returns the command that runs name with args, with
// $LBDNS_SOCKET unset so that only -socket names the socket.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LBDNS_SOCKET=") })
	return cmd
}

// run runs name with args and returns how it ended.
func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not end within %s", name, args, commandTimeout)
	case err != nil && !errors.As(err, &ee):
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// lbctl runs lbctl -socket SOCKET args.
func (w *world) lbctl(args ...string) result {
	w.t.Helper()
	return run(w.t, binaries.lbctl, append([]string{"-socket", w.socket}, args...)...)
}

// mustLbctl runs lbctl and fails the test unless it exits 0.
func (w *world) mustLbctl(args ...string) result {
	w.t.Helper()
	r := w.lbctl(args...)
	if r.code != 0 {
		w.t.Fatalf("lbctl %q: %s", args, r)
	}
	return r
}

// statusJSON runs lbctl -o json status and decodes its output strictly:
// a field the schema does not have fails the test.
func (w *world) statusJSON() *control.Status {
	w.t.Helper()
	r := w.mustLbctl("-o", "json", "status")
	var st control.Status
	decodeStrict(w.t, r.stdout, &st)
	return &st
}

// decodeStrict decodes one JSON document with no unknown fields.
func decodeStrict(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, s)
	}
	if dec.More() {
		t.Fatalf("decode %T: more than one JSON document:\n%s", v, s)
	}
}

// client returns a control-socket client, for polling (quicker than
// starting lbctl each time).
func (w *world) client() *control.Client { return control.NewClient(w.socket) }

// status returns the daemon's status through the control socket.
func (w *world) status() (*control.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.client().Status(ctx)
}

// events returns every event the daemon keeps, routine work included,
// through lbctl.
func (w *world) events() []control.Event {
	w.t.Helper()
	r := w.mustLbctl("-o", "json", "events", "--all")
	return decodeEvents(w.t, r.stdout)
}

// decodeEvents decodes lbctl events -o json: one event per line.
func decodeEvents(t *testing.T, out string) []control.Event {
	t.Helper()
	var evs []control.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var ev control.Event
		decodeStrict(t, l, &ev)
		evs = append(evs, ev)
	}
	return evs
}

// member finds resolver name in pool's members.
func member(st *control.Status, pool, name string) (control.Member, bool) {
	for _, p := range st.Pools {
		if p.Name != pool {
			continue
		}
		for _, m := range p.Members {
			if m.Resolver == name {
				return m, true
			}
		}
	}
	return control.Member{}, false
}

// tableRows finds, in lbctl's table output, every table whose header has
// exactly columns (one per pool, for members), and returns their rows as
// maps from column to cell (tabwriter pads cells with two spaces or more).
// Cells after the last column are keyed "+1", "+2", ….
func tableRows(t *testing.T, out string, columns ...string) []map[string]string {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(out, "\n")
	var rows []map[string]string
	found := false
	for i, l := range lines {
		if !slices.Equal(sep.Split(strings.TrimSpace(l), -1), columns) {
			continue
		}
		found = true
		for _, row := range lines[i+1:] {
			if strings.TrimSpace(row) == "" {
				break
			}
			m := map[string]string{}
			for j, c := range sep.Split(strings.TrimSpace(row), -1) {
				if j < len(columns) {
					m[columns[j]] = c
				} else {
					m[fmt.Sprintf("+%d", j-len(columns)+1)] = c
				}
			}
			rows = append(rows, m)
		}
	}
	if !found {
		t.Fatalf("no table with columns %q in:\n%s", columns, out)
	}
	return rows
}

// rowOf returns the row whose column col is value.
func rowOf(t *testing.T, rows []map[string]string, col, value string) map[string]string {
	t.Helper()
	for _, r := range rows {
		if r[col] == value {
			return r
		}
	}
	t.Fatalf("no row with %s %q in %v", col, value, rows)
	return nil
}

// memberColumns are the columns of lbctl status's member tables.
var memberColumns = []string{"RESOLVER", "ADDRESS", "VENDOR", "IDENTIFIED", "STATE", "SINCE", "LAST", "RTT", "FLAPS", "OVERRIDE", "WHY", "WEIGHT", "CONNS", "PPS"}

// overrideColumns are the columns of lbctl status's override table.
var overrideColumns = []string{"RESOLVER", "SCOPE", "ACTION", "REASON", "SET", "BY"}

// itoa formats n.
func itoa(n int) string { return fmt.Sprint(n) }
