package responder

import (
	"context"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// run runs a DNS client tool (dig, kdig) against the server at addr and
// returns its output; the test is skipped when the tool is not installed
// (scripts/install-test-deps.sh installs bind9-dnsutils and
// knot-dnsutils).
func run(t *testing.T, tool, addr string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s not installed (scripts/install-test-deps.sh)", tool)
	}
	ap := netip.MustParseAddrPort(addr)
	switch tool {
	case "dig":
		args = append([]string{"@" + ap.Addr().String(), "-p", strconv.Itoa(int(ap.Port())), "+tries=1", "+time=5"}, args...)
	case "kdig":
		args = append([]string{"@" + ap.Addr().String(), "-p", strconv.Itoa(int(ap.Port())), "+retry=0", "+timeout=5"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDigKdig asks the server with the real clients operators use.
func TestDigKdig(t *testing.T) {
	_, addr := start(t, &fake{Scope: 16, Big: 100})
	for _, c := range []struct {
		name string
		tool string
		args []string
		want []string
		not  []string
	}{
		{"A, AA set, RA clear", "dig", []string{"www.example.test", "A"},
			[]string{"status: NOERROR", "flags: qr aa rd;", "www.example.test.\t30\tIN\tA\t192.0.2.1", "udp: 1232"}, []string{" ra"}},
		{"AAAA", "kdig", []string{"www.example.test", "AAAA"}, []string{"status: NOERROR", "2001:db8::1", "Flags: qr aa rd;"}, nil},
		{"NXDOMAIN with SOA", "dig", []string{"nope.example.test", "A"},
			[]string{"status: NXDOMAIN", "AUTHORITY: 1", "IN\tSOA\tns1.example.test. hostmaster.example.test. 7 "}, nil},
		{"REFUSED outside the zone", "dig", []string{"example.com", "A"}, []string{"status: REFUSED"}, []string{"flags: qr aa"}},
		{"EDNS echoed", "kdig", []string{"+edns", "+bufsize=4096", "www.example.test", "A"}, []string{"Version: 0;", "UDP size: 1232 B"}, nil},
		{"BADVERS", "dig", []string{"+edns=1", "+noednsneg", "www.example.test", "A"}, []string{"status: BADVERS"}, nil},
		{"ECS echoed with the answer's scope", "kdig", []string{"+subnet=192.0.2.0/24", "geo.example.test", "A"},
			[]string{"CLIENT-SUBNET: 192.0.2.0/24/16", "192.0.2.2"}, nil},
		{"ECS with dig", "dig", []string{"+subnet=2001:db8:1::/48", "geo.example.test", "A"}, []string{"CLIENT-SUBNET: 2001:db8:1::/48/16"}, nil},
		{"ECS source 0", "dig", []string{"+subnet=0", "geo.example.test", "A"}, []string{"CLIENT-SUBNET: 0.0.0.0/0/0"}, nil},
		{"TC then TCP retry", "dig", []string{"big.example.test", "A"},
			[]string{"Truncated, retrying in TCP mode", "ANSWER: 100,", "198.51.100.100"}, nil},
		{"FORMERR without a question", "dig", []string{"+header-only", "www.example.test"}, []string{"status: FORMERR"}, nil},
		{"NOTIMP for NOTIFY", "dig", []string{"+opcode=notify", "example.test", "SOA"}, []string{"status: NOTIMP"}, nil},
		{"question case echoed", "dig", []string{"WwW.ExAmPlE.tEsT", "A"}, []string{";WwW.ExAmPlE.tEsT.\t\tIN\tA", "192.0.2.1"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := run(t, c.tool, addr, c.args...)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s %v: output lacks %q:\n%s", c.tool, c.args, w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("%s %v: output has %q:\n%s", c.tool, c.args, n, out)
				}
			}
		})
	}
}
