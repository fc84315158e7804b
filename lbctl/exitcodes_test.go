package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUsageErrorsExit2: for every command, each usage error (a missing
// argument or required flag, a bad value, an unknown flag, a bad global
// flag after the command) exits 2 before anything is sent, with the
// problem in one line naming the command, then its usage line: never
// lbctl's whole usage.
func TestUsageErrorsExit2(t *testing.T) {
	f := startFake(t, okStatus())
	for _, tc := range []struct {
		cmd  string // the command, as commands() names it ("" for lbctl's own errors)
		args []string
		want string // in the first line of stderr
	}{
		{"", nil, "no command given"},
		{"", []string{"-timeout", "0", "status"}, "-timeout must be positive"},
		{"", []string{"-timeout", "-5s", "status"}, "-timeout must be positive"},
		{"", []string{"-timeout", "soon", "status"}, "-timeout"},
		{"", []string{"-socket", "", "status"}, "-socket must name"},
		{"", []string{"stauts"}, `unknown command "stauts"`},
		{"status", []string{"status", "-timeout", "0"}, "-timeout must be positive"},
		{"status", []string{"status", "--timeout=-1s"}, "-timeout must be positive"},
		{"status", []string{"status", "-socket", ""}, "-socket must name"},
		{"status", []string{"status", "now"}, `unexpected argument "now"`},
		{"status", []string{"status", "-o", "yaml"}, "table"},
		{"drain", []string{"drain"}, "missing RESOLVER"},
		{"drain", []string{"drain", "bind-1", "--pool", "p", "--vip", "v"}, "not both"},
		{"drain", []string{"drain", "bind-1", "--reason"}, "reason"},
		{"drain", []string{"drain", "bind-1", "-timeout", "0s"}, "-timeout must be positive"},
		{"disable", []string{"disable"}, "missing RESOLVER"},
		{"disable", []string{"disable", "a", "b"}, `unexpected argument "b"`},
		{"enable", []string{"enable"}, "missing RESOLVER"},
		{"enable", []string{"enable", "bind-1", "--force"}, "-force"},
		{"events", []string{"events", "-n", "-1"}, "-n must not be negative"},
		{"events", []string{"events", "all"}, "unexpected argument"},
		{"events", []string{"events", "-f", "-timeout", "0"}, "-timeout must be positive"},
		{"gslb", []string{"gslb"}, "missing subcommand"},
		{"gslb", []string{"gslb", "memebrs"}, `unknown gslb subcommand "memebrs"`},
		{"gslb", []string{"gslb", "members", "--name", "x"}, "--name is not for gslb members"},
		{"gslb", []string{"gslb", "explain"}, "missing NAME"},
		{"gslb", []string{"gslb", "explain", "www.g.test.", "--client", "nowhere"}, "--client"},
		{"gslb", []string{"gslb", "explain", "www.g.test.", "--ecs", "198.51.100.0/33"}, "--ecs"},
		{"gslb", []string{"gslb", "explain", "www.g.test.", "--type", "BOGUS"}, "--type"},
		{"gslb", []string{"gslb", "off"}, "--reason is required"},
		{"gslb", []string{"gslb", "off", "--name", "a.", "--zone", "b.", "--reason", "x"}, "not both"},
		{"gslb", []string{"gslb", "ttl", "--reason", "x"}, "wants SECONDS"},
		{"gslb", []string{"gslb", "ttl", "60"}, "--reason is required"},
		{"gslb", []string{"gslb", "ttl", "0", "--reason", "x"}, "from 1 to 86400"},
		{"gslb", []string{"gslb", "ttl", "86401", "--reason", "x"}, "from 1 to 86400"},
		{"gslb", []string{"gslb", "ttl", "--reason", "x", "--", "-5"}, "from 1 to 86400"},
		{"gslb", []string{"gslb", "on", "--clear"}, "--clear goes with gslb ttl"},
		{"prefetch", []string{"prefetch", "now"}, "unexpected argument"},
		{"top", []string{"top", "bogus"}, `unknown kind "bogus"`},
		{"top", []string{"top", "--window", "-1s"}, "--window -1s"},
		{"top", []string{"top", "--limit", "-1"}, "--limit -1"},
		{"fleet", []string{"fleet"}, "missing subcommand"},
		{"fleet", []string{"fleet", "stauts"}, "unknown fleet subcommand"},
		{"host", []string{"host"}, "missing subcommand"},
		{"host", []string{"host", "drian"}, "unknown host subcommand"},
		{"host", []string{"host", "enable", "--reason", "x"}, "--reason goes with host drain"},
		{"bgp", []string{"bgp"}, "want bgp status"},
		{"bgp", []string{"bgp", "status", "now"}, "unexpected argument"},
		{"block", []string{"block"}, "missing CLIENT"},
		{"block", []string{"block", "192.0.2.7", "--reason", "x"}, "--for is required"},
		{"block", []string{"block", "192.0.2.7", "--for", "1h"}, "--reason is required"},
		{"block", []string{"block", "192.0.2.7", "--for", "1h", "--reason", "  "}, "--reason is required"},
		{"block", []string{"block", "192.0.2.7", "--for", "0s", "--reason", "x"}, "want a positive duration"},
		{"block", []string{"block", "192.0.2.7", "--for", "-10m", "--reason", "x"}, "want a positive duration"},
		{"block", []string{"block", "192.0.2.7", "--for", "1500ms", "--reason", "x"}, "whole seconds"},
		{"block", []string{"block", "192.0.2.7", "--for", "169h", "--reason", "x"}, "at most"},
		{"block", []string{"block", "192.0.2.7", "--for", "ever", "--reason", "x"}, "-for"},
		{"limit", []string{"limit", "192.0.2.7", "--reason", "x"}, "--for is required"},
		{"limit", []string{"limit", "192.0.2.7", "--for", "1h"}, "--reason is required"},
		{"limit", []string{"limit", "192.0.2.7", "--for", "1h", "--reason", "x", "--rate", "0"}, "--rate 0"},
		{"limit", []string{"limit", "192.0.2.7", "--for", "1h", "--reason", "x", "--rate", "-3"}, "--rate -3"},
		{"limit", []string{"limit", "192.0.2.7", "--for", "1h", "--reason", "x", "--force"}, "-force"},
		{"unblock", []string{"unblock"}, "missing CLIENT"},
		{"unblock", []string{"unblock", "a", "b"}, "unexpected argument"},
		{"clients", []string{"clients", "all"}, "unexpected argument"},
		{"reload", []string{"reload", "now"}, "unexpected argument"},
		{"check-config", []string{"check-config"}, "missing FILE"},
		{"check-config", []string{"check-config", "a.toml", "b.toml"}, "unexpected argument"},
		{"help", []string{"help", "nope"}, `unknown command "nope"`},
		{"help", []string{"help", "drain", "disable"}, "too many arguments"},
		{"version", []string{"version", "now"}, "unexpected argument"},
	} {
		t.Run(strings.Join(append([]string{tc.cmd}, tc.args...), " "), func(t *testing.T) {
			// -socket first: a case's own -socket comes later and wins.
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) < 3 {
				t.Fatalf("stderr has %d lines, want 3 or more (the problem, the usage, where the help is):\n%s", len(lines), r.stderr)
			}
			for _, l := range lines[1:] {
				if len(l) > helpWidth {
					t.Errorf("usage line of %d columns (over %d):\n%s", len(l), helpWidth, l)
				}
			}
			help := "Run 'lbctl help' for the commands."
			if tc.cmd != "" {
				help = "Run 'lbctl help " + tc.cmd + "' for its flags and examples."
			}
			if last := lines[len(lines)-1]; last != help {
				t.Errorf("last line %q does not say where the command's help is", last)
			}
			prefix := "lbctl: "
			if tc.cmd != "" {
				prefix = "lbctl " + tc.cmd + ": "
			}
			if !strings.HasPrefix(lines[0], prefix) || !strings.Contains(lines[0], tc.want) {
				t.Errorf("first line %q, want it to start with %q and contain %q", lines[0], prefix, tc.want)
			}
			if !strings.HasPrefix(lines[1], "Usage: lbctl ") {
				t.Errorf("second line %q is not the usage line", lines[1])
			}
		})
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("usage errors reached the daemon: %+v", got)
	}
}

// TestUsageErrorCasesCoverEveryCommand keeps the table above whole: a
// command added to lbctl without a usage error case fails here.
func TestUsageErrorCasesCoverEveryCommand(t *testing.T) {
	src, err := os.ReadFile("exitcodes_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		if !strings.Contains(string(src), fmt.Sprintf("{%q, []string{%q", c.name, c.name)) {
			t.Errorf("TestUsageErrorsExit2 has no case for lbctl %s", c.name)
		}
	}
}

// TestExitStatusDocumented: lbctl help prints one exit status table
// (each code 0 to 5 once, in order), every command's help prints the
// same table, and docs/lbctl.md's Exit status and lbctl.1's EXIT STATUS
// give every code the same meaning.
func TestExitStatusDocumented(t *testing.T) {
	r := lbctl(t, "help")
	if r.code != exitOK {
		t.Fatalf("lbctl help: exit %d\n%s", r.code, r.stderr)
	}
	_, table, ok := strings.Cut(r.stdout, "Exit status (every command):\n")
	if !ok {
		t.Fatalf("lbctl help has no exit status table:\n%s", r.stdout)
	}
	row := regexp.MustCompile(`(?m)^  (\d)  \S`)
	var codes []string
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		codes = append(codes, m[1])
	}
	if got := strings.Join(codes, ","); got != "0,1,2,3,4,5" {
		t.Errorf("lbctl help's exit status table has codes %s, want 0,1,2,3,4,5:\n%s", got, table)
	}
	for _, c := range commands() {
		r := lbctl(t, "help", c.name)
		if !strings.HasSuffix(r.stdout, "Exit status (every command):\n"+table) {
			t.Errorf("lbctl help %s does not end with the exit status table:\n%s", c.name, r.stdout)
		}
	}

	// The words each document must give each code, as lbctl help does.
	meaning := map[int]string{exitRefused: "refused", exitUsage: "usage", exitUnreachable: "unreachable", exitUnknown: "unknown", exitNoEtcd: "etcd"}
	for code, word := range meaning {
		if !regexp.MustCompile(`(?m)^  ` + fmt.Sprint(code) + `  .*` + word).MatchString(table) {
			t.Errorf("lbctl help: exit %d does not say %q", code, word)
		}
	}
	man, err := os.ReadFile("../packaging/man/lbctl.1")
	if err != nil {
		t.Fatal(err)
	}
	_, exit, ok := strings.Cut(string(man), "\n.SH EXIT STATUS\n")
	if !ok {
		t.Fatal("lbctl.1 has no EXIT STATUS section")
	}
	exit, _, _ = strings.Cut(exit, "\n.SH ")
	for code, word := range meaning {
		m := regexp.MustCompile(`\.TP\n\.B ` + fmt.Sprint(code) + `\n([^.][^\n]*)`).FindStringSubmatch(exit)
		if m == nil || !strings.Contains(strings.ToLower(m[1]), word) {
			t.Errorf("lbctl.1 EXIT STATUS: no .TP entry for %d saying %q:\n%s", code, word, exit)
		}
	}
	guide, err := os.ReadFile("../docs/lbctl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(guide), "\n## Exit status\n")
	if !ok {
		t.Fatal("docs/lbctl.md has no section Exit status")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	for code, word := range meaning {
		if !regexp.MustCompile(`\| ` + fmt.Sprint(code) + ` \|[^\n]*` + word).MatchString(sec) {
			t.Errorf("docs/lbctl.md, Exit status: its table has no row for %d saying %q", code, word)
		}
	}
}

// TestHelpWrapped: lbctl help and every command's help fit in 80 columns
// (a line is longer only when it is one word), and every command's help
// has examples.
func TestHelpWrapped(t *testing.T) {
	check := func(what, out string) {
		for _, l := range strings.Split(out, "\n") {
			if utf8.RuneCountInString(l) > helpWidth && len(strings.Fields(l)) > 1 {
				t.Errorf("%s: a line of %d columns: %q", what, utf8.RuneCountInString(l), l)
			}
		}
	}
	check("lbctl help", lbctl(t, "help").stdout)
	for _, c := range commands() {
		out := lbctl(t, "help", c.name).stdout
		check("lbctl help "+c.name, out)
		if !strings.Contains(out, "\nExamples:\n  lbctl "+c.name) {
			t.Errorf("lbctl help %s has no examples:\n%s", c.name, out)
		}
	}
}
