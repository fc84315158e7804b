package report

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/gslb"
)

// lastResortLines runs LastResorts(before, after) and returns its log
// lines ("LEVEL msg name") and events ("subject error=E: message").
func lastResortLines(t *testing.T, before, after []gslb.NameStatus) (logs, evs []string) {
	t.Helper()
	recs, events, _ := journalRun(t, func(j *Journal) { j.LastResorts(before, after) })
	for _, r := range recs {
		logs = append(logs, strings.TrimSpace(fmt.Sprintf("%s %s %s%s", r.level, r.msg, r.attrs["name"], r.attrs["names"])))
	}
	for _, e := range events {
		if e.Kind != control.EventLastResort {
			t.Errorf("event of kind %s, want %s", e.Kind, control.EventLastResort)
		}
		evs = append(evs, fmt.Sprintf("%s error=%v: %s", e.Subject, e.Error, e.Message))
	}
	return logs, evs
}

// TestJournalLastResorts: a name starting to answer by its last resort is
// an error for fail-open and servfail, a warning for the static set and
// while warming; a name leaving it is told at info; an unchanged list
// says nothing; more than ten names of one kind of change are told in one
// line, so that a first probe round of thousands of names does not flood
// the event log.
func TestJournalLastResorts(t *testing.T) {
	ns := func(name, lr string, warming bool) gslb.NameStatus {
		return gslb.NameStatus{Name: name, Type: dns.TypeA, LastResort: lr, Warming: warming}
	}
	warming := []gslb.NameStatus{ns("fo.g.test.", "fail-open", true), ns("st.g.test.", "static", true)}
	down := []gslb.NameStatus{ns("fo.g.test.", "fail-open", false), ns("st.g.test.", "static", false), ns("sf.g.test.", "servfail", false)}
	for _, tc := range []struct {
		name          string
		before, after []gslb.NameStatus
		logs, evs     []string
	}{
		{"warming", nil, warming, []string{
			"WARN gslb name answers by its last resort (fail-open) while its members are warming (no verdict yet) fo.g.test. A",
			"WARN gslb name answers by its last resort (static) while its members are warming (no verdict yet) st.g.test. A",
		}, []string{
			"fo.g.test./A error=false: fo.g.test. A answers by its last resort (fail-open) while its members are warming (no verdict yet)",
			"st.g.test./A error=false: st.g.test. A answers by its last resort (static) while its members are warming (no verdict yet)",
		}},
		{"back on their pools", warming, nil, []string{
			"INFO gslb name no longer answers by its last resort (fail-open) fo.g.test. A",
			"INFO gslb name no longer answers by its last resort (static) st.g.test. A",
		}, []string{
			"fo.g.test./A error=false: fo.g.test. A no longer answers by its last resort (fail-open)",
			"st.g.test./A error=false: st.g.test. A no longer answers by its last resort (static)",
		}},
		{"every member down", nil, down, []string{
			"ERROR gslb name answers by its last resort (fail-open): no pool of its policies has a member up fo.g.test. A",
			"WARN gslb name answers by its last resort (static): no pool of its policies has a member up st.g.test. A",
			"ERROR gslb name answers by its last resort (servfail): no pool of its policies has a member up sf.g.test. A",
		}, []string{
			"fo.g.test./A error=true: fo.g.test. A answers by its last resort (fail-open): no pool of its policies has a member up",
			"st.g.test./A error=false: st.g.test. A answers by its last resort (static): no pool of its policies has a member up",
			"sf.g.test./A error=true: sf.g.test. A answers by its last resort (servfail): no pool of its policies has a member up",
		}},
		{"unchanged", down, slices.Clone(down), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs, evs := lastResortLines(t, tc.before, tc.after)
			if !slices.Equal(logs, tc.logs) {
				t.Errorf("logs\n%s\nwant\n%s", strings.Join(logs, "\n"), strings.Join(tc.logs, "\n"))
			}
			if !slices.Equal(evs, tc.evs) {
				t.Errorf("events\n%s\nwant\n%s", strings.Join(evs, "\n"), strings.Join(tc.evs, "\n"))
			}
		})
	}

	t.Run("many names in one line", func(t *testing.T) {
		var many []gslb.NameStatus
		for i := range 20000 {
			many = append(many, ns(fmt.Sprintf("n%d.g.test.", i), "fail-open", true))
		}
		logs, evs := lastResortLines(t, nil, many)
		if len(logs) != 1 || len(evs) != 1 {
			t.Fatalf("20,000 names warming: %d log lines and %d events, want one of each", len(logs), len(evs))
		}
		if want := "20000 names error=false: 20000 names answer by their last resort (fail-open) while their members are warming (no verdict yet), among them n0.g.test. A, n1.g.test. A"; !strings.HasPrefix(evs[0], want) {
			t.Errorf("event %q, want it to start %q", evs[0], want)
		}
		if !strings.HasSuffix(evs[0], "n9.g.test. A (lbctl gslb status lists them all)") {
			t.Errorf("event %q does not end with the tenth name and where to see them all", evs[0])
		}
	})
}
