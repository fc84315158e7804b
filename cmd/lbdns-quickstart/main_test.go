package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/poll"
)

// TestMain runs the program itself when the test binary is started as the
// quick start (see startQuickstart), and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv("LBDNS_QUICKSTART_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer safe for the exec copier and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requireVendors skips the test unless every product is installed (fails
// it when CI=true or LBDNS_REQUIRE_VENDORS=1).
func requireVendors(t *testing.T) {
	t.Helper()
	for _, v := range vendors.All() {
		if _, err := vendors.LookPath(v); err != nil {
			if os.Getenv("CI") == "true" || os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
}

// quickConfig is the shipped quick start's shape on free ports, a temporary
// state directory and a faster check pace.
func quickConfig(t *testing.T, dir string) (path, socket string, ports map[string]uint16) {
	t.Helper()
	socket = filepath.Join(dir, "lbdns.sock")
	ports = map[string]uint16{}
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
log_level = "debug"
control_socket = %q
status_listen = "127.0.0.1:0"

[[vip]]
name       = "quickstart"
address    = "192.0.2.53"
forwarding = "nat"
pool       = "local"

[[pool]]
name    = "local"
members = ["bind", "unbound", "powerdns", "knot", "dnsmasq"]
check   = "recursive"

[check.recursive]
interval = "500ms"
timeout  = "300ms"

[check.recursive.dns]
zone = "quickstart.lbdns.test"
`, filepath.Join(dir, "state"), socket)
	for _, v := range []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"} {
		port, err := vendors.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[v] = port
		cfg += fmt.Sprintf("\n[[resolver]]\nname = %q\naddress = \"127.0.0.1:%d\"\nvendor = %q\n", v, port, v)
	}
	path = filepath.Join(dir, "quickstart.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, socket, ports
}

// TestQuickstartLifecycle starts the quick start as a process, waits until
// the daemon sees all five back ends up, kills one resolver and watches it
// go down, then sends SIGINT: the program exits 0 and no process of its
// world remains, nor anything on its ports.
func TestQuickstartLifecycle(t *testing.T) {
	requireVendors(t)
	dir := t.TempDir()
	cfgPath, socket, ports := quickConfig(t, dir)

	var out lockedBuffer
	cmd := exec.Command(os.Args[0], "-config", cfgPath, "-install=false")
	cmd.Env = append(os.Environ(), "LBDNS_QUICKSTART_MAIN=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("quick start output:\n%s", out.String())
		}
	})

	client := control.NewClient(socket)
	status := func() (*control.Status, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := client.Status(ctx)
		if err != nil {
			return nil, err.Error()
		}
		if len(st.Pools) != 1 {
			return nil, fmt.Sprintf("%d pools", len(st.Pools))
		}
		return st, fmt.Sprintf("%+v", st.Pools[0].Members)
	}
	poll.Until(t, 90*time.Second, "all five back ends up", func() (bool, string) {
		st, detail := status()
		return st != nil && st.Pools[0].Healthy == 5, detail
	})

	// The program names every resolver's pid.
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`resolver (\w+) \(\w+\) pid (\d+)`).FindAllStringSubmatch(out.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		pids[m[1]] = pid
	}
	if len(pids) != 5 {
		t.Fatalf("pids of resolvers in the output: %v, want 5", pids)
	}

	if err := syscall.Kill(pids["unbound"], syscall.SIGKILL); err != nil {
		t.Fatalf("kill unbound: %v", err)
	}
	poll.Until(t, 30*time.Second, "unbound down, the others up", func() (bool, string) {
		st, detail := status()
		if st == nil {
			return false, detail
		}
		for _, m := range st.Pools[0].Members {
			if want := m.Resolver == "unbound"; (m.State == "down") != want {
				return false, detail
			}
		}
		return st.Pools[0].Healthy == 4, detail
	})

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("quick start exited with %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("quick start still running 30 s after SIGINT")
	}

	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("resolver %s (pid %d) still exists after the quick start exited (kill 0: %v)", name, pid, err)
		}
	}
	for name, port := range ports {
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d of %s still busy: %v", port, name, err)
			continue
		}
		pc.Close()
	}
	if _, err := os.Stat(socket); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := client.Status(ctx); err == nil {
			t.Error("the daemon still answers on its control socket")
		}
	}
}

// TestQuickstartStopsWithParent runs the quick start under a shell, as
// `go run` runs it, and kills the shell: the quick start must stop too
// (SIGTERM to `go run` stops only go run) and take its world with it.
func TestQuickstartStopsWithParent(t *testing.T) {
	requireVendors(t)
	dir := t.TempDir()
	cfgPath, socket, ports := quickConfig(t, dir)
	logPath := filepath.Join(dir, "out.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// The shell waits for its child, like go run; output goes to a file
	// so that nothing waits for the grandchild's pipes.
	sh := exec.Command("/bin/sh", "-c", `"$0" "$@" & wait`, os.Args[0], "-config", cfgPath, "-install=false")
	sh.Env = append(os.Environ(), "LBDNS_QUICKSTART_MAIN=1")
	sh.Stdout, sh.Stderr = logf, logf
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) // the group, if the test failed early
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("quick start output:\n%s", b)
		}
	})
	client := control.NewClient(socket)
	poll.Until(t, 90*time.Second, "the daemon answers", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := client.Status(ctx)
		return err == nil, fmt.Sprint(err)
	})
	b, _ := os.ReadFile(logPath)
	var pids []int
	for _, m := range regexp.MustCompile(`resolver \w+ \(\w+\) pid (\d+)`).FindAllStringSubmatch(string(b), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	if len(pids) != 5 {
		t.Fatalf("pids of resolvers in the output: %v, want 5", pids)
	}

	// Kill the shell only, not its group: like SIGTERM to go run.
	if err := sh.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sh.Wait()
	poll.Until(t, 30*time.Second, "the quick start stopped with its parent", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("quickstart: stopped the daemon")), "no stop message yet"
	})
	poll.Until(t, 10*time.Second, "every resolver gone", func() (bool, string) {
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return false, fmt.Sprintf("pid %d: kill 0: %v", pid, err)
			}
		}
		return true, ""
	})
	for name, port := range ports {
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d of %s still busy: %v", port, name, err)
			continue
		}
		pc.Close()
	}
}
