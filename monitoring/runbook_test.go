package monitoring

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rule is an alerting rule of alerts.yml as far as the runbook test reads
// it: its name and its runbook_url annotation.
type rule struct {
	alert, runbook string
	line           int
}

var (
	alertLine   = regexp.MustCompile(`^\s*- alert:\s*(\S+)\s*$`)
	runbookLine = regexp.MustCompile(`^\s*runbook_url:\s*"([^"]*)"\s*$`)
	// otherRule starts a recording rule or a group: the alert before it
	// has ended.
	otherRule = regexp.MustCompile(`^\s*- (record|name):`)
)

// alertRules reads the alerting rules of path, each with the
// runbook_url it carries ("" when none).
func alertRules(t *testing.T, path string) []rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rule
	cur := -1
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if m := alertLine.FindStringSubmatch(l); m != nil {
			out = append(out, rule{alert: m[1], line: n})
			cur = len(out) - 1
			continue
		}
		if otherRule.MatchString(l) {
			cur = -1
			continue
		}
		if m := runbookLine.FindStringSubmatch(l); m != nil && cur >= 0 {
			if out[cur].runbook != "" {
				t.Errorf("%s:%d: a second runbook_url in rule %s", path, n, out[cur].alert)
			}
			out[cur].runbook = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anchor is the fragment a Markdown renderer (GitHub's rule) gives a
// heading: lower case, spaces to hyphens, other punctuation dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// runbookSections reads the "## " sections of a runbook: anchor to the
// heading and whether its body says something.
func runbookSections(t *testing.T, path string) (headings map[string]string, empty []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	headings = map[string]string{}
	parts := strings.Split("\n"+string(raw), "\n## ")
	for _, p := range parts[1:] {
		h, body, _ := strings.Cut(p, "\n")
		a := anchor(h)
		if prev, dup := headings[a]; dup {
			t.Errorf("%s: sections %q and %q have the same anchor #%s", path, prev, h, a)
		}
		headings[a] = h
		for _, part := range []string{"**Means.**", "**Check.**", "**Act.**"} {
			if !strings.Contains(body, part) {
				empty = append(empty, h+" (no "+part+")")
			}
		}
	}
	return headings, empty
}

// TestRunbook: every alert rule has a runbook_url, of the form
// RUNBOOK.md#ANCHOR with the anchor of a section of RUNBOOK.md named
// after the rule; every section of RUNBOOK.md is a rule's; each says
// what the alert means, how to check it and what to do.
func TestRunbook(t *testing.T) {
	rules := alertRules(t, "alerts.yml")
	if len(rules) < 30 {
		t.Fatalf("read %d alert rules from alerts.yml", len(rules))
	}
	sections, empty := runbookSections(t, "../RUNBOOK.md")
	for _, e := range empty {
		t.Errorf("RUNBOOK.md: section %s", e)
	}
	used := map[string]bool{}
	for _, r := range rules {
		file, frag, ok := strings.Cut(r.runbook, "#")
		switch {
		case r.runbook == "":
			t.Errorf("alerts.yml:%d: rule %s has no annotations.runbook_url", r.line, r.alert)
			continue
		case !ok || file != "RUNBOOK.md":
			t.Errorf("alerts.yml:%d: rule %s: runbook_url %q is not RUNBOOK.md#ANCHOR", r.line, r.alert, r.runbook)
			continue
		}
		h, found := sections[frag]
		switch {
		case !found:
			t.Errorf("alerts.yml:%d: rule %s: runbook_url %q: RUNBOOK.md has no section #%s", r.line, r.alert, r.runbook, frag)
		case h != r.alert:
			t.Errorf("alerts.yml:%d: rule %s points at the section %q", r.line, r.alert, h)
		}
		used[frag] = true
	}
	for a, h := range sections {
		if !used[a] {
			t.Errorf("RUNBOOK.md: section %q (#%s) belongs to no rule of alerts.yml", h, a)
		}
	}
}

// TestREADMEAlertsTable: the table of alerts of the operator guides
// (docs/running-as-a-service.md, linked from the README) lists every rule
// of alerts.yml, with its severity, and no other.
func TestREADMEAlertsTable(t *testing.T) {
	const doc = "docs/running-as-a-service.md"
	raw, err := os.ReadFile("../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n| alert | fires when | severity |\n")
	if !ok {
		t.Fatal(doc + " has no table of alerts (| alert | fires when | severity |)")
	}
	row := regexp.MustCompile("^\\| `(Lbdns[A-Za-z]+)` \\|.*\\| (page|ticket) \\|$")
	listed := map[string]string{}
	for _, l := range strings.Split(table, "\n")[1:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: alerts table row not `| `NAME` | ... | page or ticket |`: %s", doc, l)
			continue
		}
		listed[m[1]] = m[2]
	}
	severities := alertSeverities(t, "alerts.yml")
	var names []string
	for name, sev := range severities {
		names = append(names, name)
		switch got, ok := listed[name]; {
		case !ok:
			t.Errorf("%s's alerts table has no row for %s", doc, name)
		case got != sev:
			t.Errorf("%s's alerts table says %s is %s; alerts.yml says %s", doc, name, got, sev)
		}
	}
	for name := range listed {
		if !slices.Contains(names, name) {
			t.Errorf("%s's alerts table lists %s, which alerts.yml has not", doc, name)
		}
	}
}

// alertSeverities reads the severity label of each alert rule of path.
func alertSeverities(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	name := ""
	sev := regexp.MustCompile(`^\s*severity:\s*(\S+)\s*$`)
	for _, l := range strings.Split(string(raw), "\n") {
		if m := alertLine.FindStringSubmatch(l); m != nil {
			name = m[1]
			out[name] = ""
		} else if m := sev.FindStringSubmatch(l); m != nil && name != "" {
			out[name] = m[1]
			name = ""
		}
	}
	for n, s := range out {
		if s == "" {
			t.Errorf("%s: rule %s has no severity label", path, n)
		}
	}
	return out
}
