package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// manTerms returns the terms of the .TP entries of a man page (the line
// after each .TP), with the font macros, quotes and escapes taken out:
// ".BI \"drain \" RESOLVER" is "drain RESOLVER".
func manTerms(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.Split(string(b), "\n")
	macro := regexp.MustCompile(`^\.(B|I|BI|IB|RI|IR|BR|RB)\s+`)
	var out []string
	for i := 0; i+1 < len(ls); i++ {
		if ls[i] != ".TP" {
			continue
		}
		term := macro.ReplaceAllString(ls[i+1], "")
		term = strings.NewReplacer(`"`, "", `\-`, "-", `\fB`, "", `\fI`, "", `\fR`, "").Replace(term)
		out = append(out, strings.Join(strings.Fields(term), " "))
	}
	return out
}

// hasTerm reports whether one of terms starts with the words of want.
func hasTerm(terms []string, want string) bool {
	for _, t := range terms {
		if t == want || strings.HasPrefix(t, want+" ") {
			return true
		}
	}
	return false
}

// TestManPagesListEveryCommand: lbctl.1 has an entry for every command
// lbctl's usage lists (and every gslb subcommand), lbdnsd.8 one for every
// flag lbdnsd -h lists.
func TestManPagesListEveryCommand(t *testing.T) {
	r := run(t, binaries.lbctl, "help")
	if r.code != 0 {
		t.Fatalf("lbctl help: %s", r)
	}
	usage, _, _ := strings.Cut(r.stdout, "\nGlobal flags:")
	cmdLine := regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)`)
	var cmds []string
	for _, m := range cmdLine.FindAllStringSubmatch(usage, -1) {
		cmds = append(cmds, m[1])
	}
	if len(cmds) < 10 {
		t.Fatalf("read %d commands from lbctl help: %q\n%s", len(cmds), cmds, r.stdout)
	}
	terms := manTerms(t, "../packaging/man/lbctl.1")
	for _, c := range cmds {
		if c == "gslb" {
			for _, sub := range []string{"members", "status", "explain", "off", "on", "ttl"} {
				if !hasTerm(terms, "gslb "+sub) {
					t.Errorf("lbctl.1 has no entry for gslb %s (entries: %q)", sub, terms)
				}
			}
			continue
		}
		if !hasTerm(terms, c) {
			t.Errorf("lbctl.1 has no entry for %s (entries: %q)", c, terms)
		}
	}
	for _, f := range []string{"-socket", "-o", "-timeout", "-version"} {
		if !hasTerm(terms, f) {
			t.Errorf("lbctl.1 has no entry for the global flag %s", f)
		}
	}

	r = run(t, binaries.lbdnsd, "-h")
	flagLine := regexp.MustCompile(`(?m)^  (-[a-z-]+)`)
	flags := flagLine.FindAllStringSubmatch(r.stdout+r.stderr, -1)
	if len(flags) < 5 {
		t.Fatalf("read %d flags from lbdnsd -h:\n%s", len(flags), r)
	}
	terms = manTerms(t, "../packaging/man/lbdnsd.8")
	for _, m := range flags {
		if !hasTerm(terms, m[1]) {
			t.Errorf("lbdnsd.8 has no entry for %s (entries: %q)", m[1], terms)
		}
	}
}

// TestREADMEForOperators: README starts with what lbdns is and the two
// commands (which name files that exist), and neither README,
// CONFIGURATION.md nor RUNBOOK.md carries notes written for the team or stale promises.
func TestREADMEForOperators(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	head, _, _ := strings.Cut(readme, "\n---\n")
	if !strings.HasPrefix(head, "# lbdns\n\nlbdns ") {
		t.Errorf("README does not start by saying what lbdns is:\n%s", head)
	}
	intro, _, _ := strings.Cut(strings.TrimPrefix(head, "# lbdns\n\n"), "\n\n")
	if n := len(regexp.MustCompile(`[.!?](\s|$)`).FindAllString(intro, -1)); n != 2 {
		t.Errorf("README's first paragraph has %d sentences, want 2:\n%s", n, intro)
	}
	for _, cmd := range []string{"go run ./cmd/lbdnsd -dry-run -config configs/quickstart.toml", "scripts/test.sh"} {
		if !strings.Contains(head, "```sh\n"+cmd+"\n```") {
			t.Errorf("README's first screen lacks the command %q", cmd)
		}
	}
	for _, f := range []string{"../configs/quickstart.toml", "../scripts/test.sh", "../cmd/lbdnsd/main.go", "../cmd/lbdns-quickstart/main.go"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("README names %s: %v", f, err)
		}
	}
	if fi, err := os.Stat("../scripts/test.sh"); err == nil && fi.Mode()&0o111 == 0 {
		t.Error("scripts/test.sh is not executable")
	}

	stale := regexp.MustCompile(`(?i)for now the only one|to come\b|come later|comes later|design notes|the brief|where the issue|left room|\bsession \d|\bissue \d|garbage.collector|GOGC|experiment`)
	guides, err := filepath.Glob("../docs/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no operator guides in docs/: %v", err)
	}
	for _, doc := range append([]string{"../README.md", "../CONFIGURATION.md", "../RUNBOOK.md"}, guides...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// The README and the guides are the operator's: no test names,
		// no notes on how the work was done (CONTRIBUTING.md and
		// ARCHITECTURE.md have those).
		forOperator := doc == "../README.md" || strings.HasPrefix(doc, "../docs/")
		for i, l := range strings.Split(string(b), "\n") {
			if m := stale.FindString(l); m != "" {
				t.Errorf("%s:%d: %q is for the team, or stale: %s", doc, i+1, m, l)
			}
			if m := teamWords.FindString(l); forOperator && m != "" {
				t.Errorf("%s:%d: %q belongs in CONTRIBUTING.md or ARCHITECTURE.md: %s", doc, i+1, m, l)
			}
		}
	}
}

// teamWords are words of the contributors' documents: test and fuzz
// target names, and notes on issues, work sessions, helpers and
// experiments.
var teamWords = regexp.MustCompile(`\b(Test|Fuzz|Benchmark)[A-Z]\w*|(?i)\b(issues?|helpers?|experiments?|work sessions?|design notes)\b`)

// TestDocsLinks: every relative markdown link ([text](path#anchor)) of
// README.md, docs/*.md, RUNBOOK.md, CONTRIBUTING.md and CONFIGURATION.md
// names a file that exists and, with an anchor, a heading of that file
// (GitHub's anchors: lower case, spaces to '-', punctuation dropped).
func TestDocsLinks(t *testing.T) {
	docs := []string{"../README.md", "../RUNBOOK.md", "../CONTRIBUTING.md", "../CONFIGURATION.md"}
	guides, err := filepath.Glob("../docs/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no operator guides in docs/: %v", err)
	}
	docs = append(docs, guides...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			target, frag, _ := strings.Cut(l.target, "#")
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // https:, mailto:
			}
			path := doc
			if target != "" {
				path = filepath.Join(filepath.Dir(doc), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %v", doc, l.line, l.target, err)
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", doc, l.line, l.target, path, frag)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d links", checked)
	}
}

type mdLink struct {
	target string
	line   int
}

// markdownLinks returns the targets of the inline links of a markdown
// text, outside code blocks and code spans.
func markdownLinks(text string) []mdLink {
	link := regexp.MustCompile(`\]\(([^()\s]+)\)`)
	span := regexp.MustCompile("`[^`]*`")
	var out []mdLink
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(span.ReplaceAllString(l, "``"), -1) {
			out = append(out, mdLink{m[1], i + 1})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown text: lower case, punctuation dropped, spaces to '-', and
// "-1", "-2"... after the second and later headings of one text.
func headingAnchors(text string) map[string]bool {
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(l)
		if fenced || m == nil {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
