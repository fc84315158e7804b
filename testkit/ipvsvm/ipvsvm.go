// Package ipvsvm holds helpers for tests that run inside the IPVS virtual
// machine started by scripts/ipvs-vm.sh: a guard that skips outside the VM,
// command runners, and a parser for the table as ipvsadm shows it, so tests
// can cross-check what the netlink code did against an independent tool.
//
// Test files that use it carry the build tag "ipvsvm" and run only through
// the script:
//
//	scripts/ipvs-vm.sh ./vip -test.v
package ipvsvm

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"lbdns/vip"
)

// EnvVar is set to "1" by the VM's init for the test binary. Require skips
// a test when it is missing, so that a host with IPVS is never touched by a
// test built with the ipvsvm tag by mistake.
const EnvVar = "LBDNS_IPVS_VM"

// InVM reports whether the process runs inside the IPVS test VM.
func InVM() bool { return os.Getenv(EnvVar) == "1" }

// Require skips t unless it runs inside the IPVS test VM.
func Require(t testing.TB) {
	t.Helper()
	if !InVM() {
		t.Skipf("not inside the IPVS VM (%s unset); run scripts/ipvs-vm.sh", EnvVar)
	}
}

// Run runs name with args and returns its combined output. It fails t when
// the command fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Sh runs a shell command line with busybox sh and returns its combined
// output. It fails t when the command fails.
func Sh(t testing.TB, line string) string {
	t.Helper()
	return Run(t, "sh", "-c", line)
}

// Dest is one real server as ipvsadm shows it.
type Dest struct {
	// Forward is "m" (NAT/masquerade), "g" (direct routing) or "i"
	// (tunnel).
	Forward string
	Weight  int
}

// Service is one virtual service as ipvsadm shows it.
type Service struct {
	Scheduler string
	// Dests is keyed by "ADDR:PORT" as ipvsadm prints it ("[v6]:port").
	Dests map[string]Dest
}

// Table is the IPVS table as ipvsadm shows it, keyed by "-u ADDR:PORT",
// "-t ADDR:PORT" or "-f MARK".
type Table map[string]Service

// String renders t in the sorted, stable form of `ipvsadm -Sn`, so two
// tables can be compared and printed in a failure message.
func (t Table) String() string {
	var lines []string
	for k, s := range t {
		lines = append(lines, fmt.Sprintf("-A %s -s %s", k, s.Scheduler))
		for a, d := range s.Dests {
			lines = append(lines, fmt.Sprintf("-a %s -r %s -%s -w %d", k, a, d.Forward, d.Weight))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Dump returns the kernel's IPVS table read with `ipvsadm -Sn`.
func Dump(t testing.TB) Table {
	t.Helper()
	tab, err := ParseSave(Run(t, "ipvsadm", "-Sn"))
	if err != nil {
		t.Fatalf("ipvsadm -Sn: %v", err)
	}
	return tab
}

// ParseSave parses the output of `ipvsadm -Sn` (the save format).
func ParseSave(out string) (Table, error) {
	tab := Table{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d: too short: %q", n, sc.Text())
		}
		key := f[1] + " " + f[2]
		opts := map[string]string{}
		var fwd string
		for i := 3; i < len(f); i++ {
			switch f[i] {
			case "-m", "-g", "-i":
				fwd = f[i][1:]
			case "-s", "-r", "-w", "-x", "-y", "-M", "-b", "-p":
				if i+1 >= len(f) {
					return nil, fmt.Errorf("line %d: %s without value", n, f[i])
				}
				opts[f[i]] = f[i+1]
				i++
			}
		}
		switch f[0] {
		case "-A":
			s := tab[key]
			s.Scheduler = opts["-s"]
			if s.Dests == nil {
				s.Dests = map[string]Dest{}
			}
			tab[key] = s
		case "-a":
			s, ok := tab[key]
			if !ok {
				return nil, fmt.Errorf("line %d: destination before its service %s", n, key)
			}
			w, err := strconv.Atoi(opts["-w"])
			if err != nil {
				return nil, fmt.Errorf("line %d: weight: %w", n, err)
			}
			s.Dests[opts["-r"]] = Dest{Forward: fwd, Weight: w}
		default:
			return nil, fmt.Errorf("line %d: unknown command %q", n, f[0])
		}
	}
	return tab, sc.Err()
}

// FromVIP renders a vip.Table the way ipvsadm shows it, so the kernel's
// table read with Dump can be compared with what a test asked for.
func FromVIP(vt vip.Table) Table {
	tab := Table{}
	for k, s := range vt {
		flag := "-u"
		if k.Proto == vip.TCP {
			flag = "-t"
		}
		svc := Service{Scheduler: s.Scheduler, Dests: map[string]Dest{}}
		for a, d := range s.Dests {
			svc.Dests[a.String()] = Dest{Forward: forward(d.Forwarding), Weight: int(d.Weight)}
		}
		tab[flag+" "+netip.AddrPortFrom(k.Addr, k.Port).String()] = svc
	}
	return tab
}

// forward returns ipvsadm's letter for a forwarding method.
func forward(f vip.Forwarding) string {
	switch f {
	case vip.NAT:
		return "m"
	case vip.Tunnel:
		return "i"
	case vip.DirectRoute:
		return "g"
	case vip.Local:
		return "local"
	}
	return f.String()
}

// Merge returns a new table with the services of all ts; a later table's
// service replaces an earlier one's with the same key.
func Merge(ts ...Table) Table {
	out := Table{}
	for _, t := range ts {
		for k, s := range t {
			out[k] = s
		}
	}
	return out
}
