package main

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/testkit/poll"
)

// TestPlanMembersShipped: the shipped quick start runs its four GSLB
// members itself, each on its loopback address at the tcp monitor's port.
func TestPlanMembersShipped(t *testing.T) {
	cfg, err := configs.Load("../../configs/quickstart.toml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range planMembers(cfg) {
		got = append(got, m.pool+"/"+m.name+"@"+joinAddrs(m.listen))
	}
	want := "east/east-1@127.0.0.11:5380 east/east-2@127.0.0.12:5380 west/west-1@127.0.0.21:5380 west/west-2@127.0.0.22:5380"
	if strings.Join(got, " ") != want {
		t.Errorf("members %q, want %q", got, want)
	}
}

// TestMemberProcess: a member process writes the banner the monitor
// expects; stopped (SIGSTOP) it accepts connections but writes nothing.
func TestMemberProcess(t *testing.T) {
	m := member{pool: "p", name: "m1", listen: nil}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m.listen = append(m.listen, mustAddrPort(t, addr))
	t.Setenv("LBDNS_QUICKSTART_MAIN", "1")
	p, err := startMember(m, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if line := readLine(t, addr); line != memberBanner+"p/m1 ok\n" {
		t.Errorf("banner %q", line)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Stopped (state T), it cannot write a banner, yet the kernel still
	// accepts the connection: the monitor fails by its timeout.
	poll.Until(t, 10*time.Second, "the member stopped", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return false, err.Error()
		}
		_, after, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(after, "T"), string(b)
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("a stopped member refuses connections: %v", err)
	}
	c.Close()
	p.cmd.Process.Signal(syscall.SIGCONT)
	if line := readLine(t, addr); line != memberBanner+"p/m1 ok\n" {
		t.Errorf("banner after SIGCONT %q", line)
	}
}

func readLine(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// TestInstallsOnlyTheQuickstart: the quick start installs the five
// resolver products and dig, none of the test toolchain.
func TestInstallsOnlyTheQuickstart(t *testing.T) {
	args := append(append([]string{}, installCommand[1:]...), "--list")
	args[0] = "../../" + args[0]
	out, err := exec.Command(installCommand[0], args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(out))
	want := []string{"unbound", "bind9", "knot-resolver", "pdns-recursor", "dnsmasq", "bind9-dnsutils"}
	if !slices.Equal(got, want) {
		t.Errorf("the quick start installs %q, want %q", got, want)
	}
}
