//go:build linux

package announce_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/testkit/bird"
	"lbdns/testkit/poll"
)

// TestBirdBFDStall: a speaker process with BFD towards BIRD's BFD is
// stopped (SIGSTOP) for 3 s, longer than BFD's detection time: the
// router drops the route, as it should. Once the process runs again its
// session comes back and stays: the route is in the router's table
// within 20 s and there for the 15 s after, with no session reset
// meanwhile (a BFD expiry or a down packet the speaker took while its
// session was down must not reset the next session).
func TestBirdBFDStall(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, HoldTime: 30, BFD: true})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+b.Host().AddrV4().String(), helperEnv+"_ID="+b.Host().RootAddrV4().String(), helperEnv+"_BFD=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("speaker process:\n%s", out.String())
		}
	})
	b.WaitRoute("route announced by the speaker process", "192.0.2.53/32", "100", "")
	b.Eventually("BFD session up", func(out string) bool { return strings.Contains(out, " Up ") }, "show", "bfd", "sessions")

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b.WaitGone("route dropped while the speaker is stopped", "192.0.2.53/32")
	time.Sleep(3 * time.Second) // the stall the router sees; no clock of the test's own
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	cont := time.Now()
	back := poll.Until(t, 20*time.Second, "the route back after the stall", func() (bool, string) {
		_, ok := b.Routes()["192.0.2.53/32"]
		st, _ := b.Birdc("show", "protocols", "all", "lb")
		return ok, st
	})
	t.Logf("route back %v after SIGCONT", back.Sub(cont).Round(time.Millisecond))
	stays := time.Now().Add(15 * time.Second)
	for time.Now().Before(stays) {
		if _, ok := b.Routes()["192.0.2.53/32"]; !ok {
			st, _ := b.Birdc("show", "protocols", "all", "lb")
			t.Fatalf("the route went again %v after it came back:\n%s", time.Since(back).Round(time.Millisecond), st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := b.Birdc("show", "protocols", "all", "lb"); !strings.Contains(st, "Established") {
		t.Errorf("session after the stall:\n%s", st)
	}
	b.Eventually("BFD session up again", func(out string) bool { return strings.Contains(out, " Up ") }, "show", "bfd", "sessions")
	if testing.Verbose() {
		t.Logf("speaker process:\n%s", out.String())
	}
}
