// Package vendors starts real recursive resolver products (unbound, BIND,
// Knot Resolver, PowerDNS Recursor, dnsmasq) from the host's Debian packages
// as foreground processes on loopback, for tests. Each one listens on
// 127.0.0.1 with a port of its own and forwards every query to one upstream
// (usually an internal/lab/dnstest server), and talks to nothing else: no root
// priming, no trust-anchor refresh, no security polling. Options.Listen and
// Options.Allow add addresses to listen on and client networks to answer,
// for clients in network namespaces; the default answers 127.0.0.0/8 only.
//
// Install the products with scripts/install-test-deps.sh. When a product's
// binary is missing, Start skips the test, unless the environment says the
// products are required (CI=true or LBDNS_REQUIRE_VENDORS=1), in which case
// it fails it.
//
// The processes run as the test's user (root is fine: none of them is told
// to drop privileges) with their configuration and working files in
// t.TempDir(). Their stdout and stderr are captured; Process.Log returns them
// for failure messages.
package vendors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Vendor names a resolver product.
type Vendor string

// The resolver products this package can start.
const (
	// Unbound is NLnet Labs unbound (binary unbound).
	Unbound Vendor = "unbound"
	// BIND is ISC BIND 9 (binary named).
	BIND Vendor = "bind"
	// Knot is CZ.NIC Knot Resolver (binary kresd).
	Knot Vendor = "knot"
	// PowerDNS is PowerDNS Recursor (binary pdns_recursor).
	PowerDNS Vendor = "powerdns"
	// Dnsmasq is dnsmasq (binary dnsmasq).
	Dnsmasq Vendor = "dnsmasq"
)

// All returns every vendor this package can start, in a fixed order.
func All() []Vendor {
	return []Vendor{Unbound, BIND, Knot, PowerDNS, Dnsmasq}
}

// Binary returns the name of the vendor's executable, or "" for an unknown
// vendor.
func (v Vendor) Binary() string {
	s, err := specFor(v, "", netip.AddrPort{}, netip.AddrPort{}, Options{})
	if err != nil {
		return ""
	}
	return s.binary
}

// Options tune a vendor's configuration. The zero value gives every product
// the same behaviour as far as they allow.
type Options struct {
	// Prefetch turns the product's native prefetch on: unbound
	// "prefetch: yes", BIND "prefetch 2 9", Knot Resolver the predict
	// module, PowerDNS Recursor "refresh-on-ttl-perc=50"; dnsmasq has none.
	// When false it is off, also for BIND, whose default is on.
	Prefetch bool
	// SubnetCache turns unbound's subnet cache on (module-config
	// "subnetcache iterator"): it sends the client's ECS upstream (ECS
	// forwarded as the client gave it, up to /32 and /128) and caches
	// answers per the scope the upstream returns. Other products ignore
	// it.
	SubnetCache bool
	// Dnstap, when set, makes the product send dnstap messages of its
	// client queries and responses (CLIENT_QUERY, CLIENT_RESPONSE, with
	// this identity) to a Frame Streams listener: unbound, BIND and
	// Knot Resolver. Starting PowerDNS Recursor or dnsmasq with it is an
	// error (neither sends dnstap).
	Dnstap *Dnstap
	// EDE turns unbound's Extended DNS Errors on (ede: yes) with the
	// logs that say why an answer failed (log-servfail: yes,
	// val-log-level: 2, verbosity 2): what a resolver's operator reads
	// about an upstream's errors. Other products ignore it.
	EDE bool
	// Listen lists IPv4 addresses the product listens on besides its
	// 127.0.0.1 one, on the same port, UDP and TCP: the root end of a
	// network namespace's veth pair, for clients inside the namespace
	// (packets to 127.0.0.0/8 never cross a link). Each must be an
	// address of the test's namespace when the product starts. The
	// products run IPv4-only: an IPv6 address is an error.
	Listen []netip.Addr
	// Allow lists IPv4 client networks the product answers besides
	// 127.0.0.0/8: unbound access-control, BIND allow-query and
	// allow-recursion, PowerDNS Recursor allow-from. Knot Resolver and
	// dnsmasq answer every client that reaches an address they listen
	// on, so they need none.
	Allow []netip.Prefix
}

// Dnstap says where a product sends dnstap: a Unix socket, or, for
// unbound only, TCP.
type Dnstap struct {
	// Unix is the path of the listener's Unix socket.
	Unix string
	// TCP is the listener's TCP address (unbound's dnstap-ip); when set
	// it is used instead of Unix.
	TCP netip.AddrPort
	// Identity is the identity the product sends; "" sends its default
	// (the host name).
	Identity string
}

// ReadyTimeout bounds how long Start and Restart wait for a process to
// answer its first query.
const ReadyTimeout = 10 * time.Second

// Process is one running resolver product.
type Process struct {
	// Vendor is the product.
	Vendor Vendor
	// Addr is where it listens, UDP and TCP.
	Addr netip.AddrPort
	// Upstream is where it forwards queries.
	Upstream netip.AddrPort
	// Dir holds its configuration and working files.
	Dir string

	path string
	spec spec

	mu   sync.Mutex // guards the fields below
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's result, set before done is closed
	log  lockedBuffer
}

// required reports whether the environment demands that every vendor be
// installed.
func required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("LBDNS_REQUIRE_VENDORS") == "1"
}

// LookPath returns the path of v's binary, also looking in /usr/sbin and
// /sbin, which are not on every user's PATH.
func LookPath(v Vendor) (string, error) {
	bin := v.Binary()
	if bin == "" {
		return "", fmt.Errorf("vendors: unknown vendor %q", v)
	}
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, bin)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("vendors: %s: binary %q not found (run scripts/install-test-deps.sh)", v, bin)
}

// Start starts vendor v on a free 127.0.0.1 port (free for both UDP and
// TCP), forwarding to upstream, and waits up to ReadyTimeout until it
// answers a query. It registers a cleanup that kills the process. If the
// binary is missing it skips the test (fails it when CI=true or
// LBDNS_REQUIRE_VENDORS=1); any other problem fails the test.
func Start(t testing.TB, v Vendor, upstream netip.AddrPort) *Process {
	t.Helper()
	return StartWith(t, v, upstream, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, v Vendor, upstream netip.AddrPort, opts Options) *Process {
	t.Helper()
	if v.Binary() == "" {
		t.Fatalf("vendors: unknown vendor %q (want one of %v)", v, All())
	}
	path := Require(t, v)
	dir := t.TempDir()
	// The products may chdir or drop privileges; make the directory
	// reachable whatever they do.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("vendors: %v", err)
	}
	p := &Process{Vendor: v, Upstream: upstream, Dir: dir, path: path}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Logf("vendors: %s: kill: %v", v, err)
		}
	})
	// Another process may grab the port between FreePort and the product's
	// bind; try a few ports.
	for attempt := range 3 {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("vendors: %v", err)
		}
		p.Addr = netip.AddrPortFrom(loopback(), port)
		p.spec, err = specFor(v, dir, p.Addr, upstream, opts)
		if err != nil {
			t.Fatal(err)
		}
		for name, content := range p.spec.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatalf("vendors: %v", err)
			}
		}
		err = p.start()
		if err == nil {
			return p
		}
		if attempt == 2 {
			t.Fatalf("vendors: %v\n%s", err, p.Log())
		}
		t.Logf("vendors: %v; trying another port", err)
	}
	panic("unreachable")
}

// Require returns the path of v's binary, or skips t without it (fails
// it when CI=true or LBDNS_REQUIRE_VENDORS=1): for a test that must set
// up more before it starts v.
func Require(t testing.TB, v Vendor) string {
	t.Helper()
	path, err := LookPath(v)
	if err != nil {
		if required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return path
}

// Launch starts vendor v listening on addr (UDP and TCP), forwarding to
// upstream, with its configuration and working files in dir, and waits up
// to ReadyTimeout until it answers. Unlike Start it needs no test: programs
// (cmd/lbdns-quickstart) use it and must call Kill when done. The process
// has its own process group and is killed if the caller's thread dies.
func Launch(v Vendor, dir string, addr, upstream netip.AddrPort, opts Options) (*Process, error) {
	path, err := LookPath(v)
	if err != nil {
		return nil, err
	}
	sp, err := specFor(v, dir, addr, upstream, opts)
	if err != nil {
		return nil, err
	}
	for name, content := range sp.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("vendors: %w", err)
		}
	}
	p := &Process{Vendor: v, Addr: addr, Upstream: upstream, Dir: dir, path: path, spec: sp}
	if err := p.start(); err != nil {
		return nil, fmt.Errorf("vendors: %w\n%s", err, p.Log())
	}
	return p, nil
}

// Pid returns the process id of the running process, 0 when it is not
// running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isDone(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

// loopback returns 127.0.0.1.
func loopback() netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, 1}) }

// FreePort returns a port on 127.0.0.1 that is free for both UDP and TCP at
// the time of the call.
func FreePort() (uint16, error) {
	var lastErr error
	for range 50 {
		udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("free port: %w", err)
		}
		port := udp.LocalAddr().(*net.UDPAddr).Port
		tcp, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		udp.Close()
		if err != nil {
			lastErr = err
			continue
		}
		tcp.Close()
		return uint16(port), nil
	}
	return 0, fmt.Errorf("free port: no port free for both udp and tcp: %w", lastErr)
}

// start launches the process and waits until it answers.
func (p *Process) start() error {
	p.mu.Lock()
	if p.cmd != nil && !isDone(p.done) {
		p.mu.Unlock()
		return fmt.Errorf("%s: already running", p.Vendor)
	}
	cmd := exec.Command(p.path, p.spec.args...)
	cmd.Dir = p.Dir
	cmd.Stdin = nil
	fmt.Fprintf(&p.log, "=== %s %v\n", p.path, p.spec.args)
	cmd.Stdout = &p.log
	cmd.Stderr = &p.log
	// Own process group, so signals from the terminal do not reach it, and
	// die with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: start: %w", p.Vendor, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		fmt.Fprintf(&p.log, "=== exited: %v\n", err)
		close(done)
	}()
	p.mu.Unlock()

	if err := p.waitReady(done); err != nil {
		p.Kill()
		return err
	}
	return nil
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitReady polls the process with a CHAOS version.bind query until it
// answers (any answer, whatever the rcode: the query never reaches the
// upstream), it exits, or ReadyTimeout passes.
func (p *Process) waitReady(done chan struct{}) error {
	deadline := time.Now().Add(ReadyTimeout)
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	q := new(dns.Msg)
	q.SetQuestion("version.bind.", dns.TypeTXT)
	q.Question[0].Qclass = dns.ClassCHAOS
	for {
		if isDone(done) {
			return fmt.Errorf("%s: exited before answering", p.Vendor)
		}
		if _, _, err := c.Exchange(q, p.Addr.String()); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no answer on %v within %v", p.Vendor, p.Addr, ReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the process to exit. Kill on a process
// that is not running does nothing.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: kill: %w", p.Vendor, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s: pid %d still running 10 s after SIGKILL", p.Vendor, cmd.Process.Pid)
	}
}

// Freeze stops the process with SIGSTOP: its sockets stay bound and queries
// pile up unanswered, like a hung server. It returns once every thread of
// the process has stopped (a signal alone returns before that).
func (p *Process) Freeze() error { return p.signal(syscall.SIGSTOP, true) }

// Thaw resumes a frozen process with SIGCONT and returns once none of its
// threads is stopped.
func (p *Process) Thaw() error { return p.signal(syscall.SIGCONT, false) }

func (p *Process) signal(sig syscall.Signal, stopped bool) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return fmt.Errorf("%s: signal %v: not running", p.Vendor, sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal %v: %w", p.Vendor, sig, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		all, err := allThreadsStopped(cmd.Process.Pid, stopped)
		if err != nil {
			return fmt.Errorf("%s: signal %v: %w", p.Vendor, sig, err)
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: signal %v: threads not in the expected state after 5 s", p.Vendor, sig)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of pid is stopped (when
// stopped is true) or whether none is (when stopped is false), from the
// state field of /proc/PID/task/TID/stat.
func allThreadsStopped(pid int, stopped bool) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, fmt.Errorf("read threads: %w", err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		// The state follows the command name, which is in parentheses and
		// may itself contain spaces or parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("parse %s/stat: %q", task.Name(), b)
		}
		state := b[i+2]
		isStopped := state == 'T' || state == 't'
		if isStopped != stopped {
			return false, nil
		}
	}
	return true, nil
}

// Running reports whether the process is running (frozen counts as
// running).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isDone(p.done)
}

// Restart starts the product again on the same port with the same
// configuration (its cache starts empty), after killing it if it still
// runs, and waits until it answers. The cleanup registered by Start kills
// the new process too.
func (p *Process) Restart(t testing.TB) error {
	t.Helper()
	if err := p.Kill(); err != nil {
		return err
	}
	var err error
	// The port can stay busy for a moment after the kill.
	for range 5 {
		if err = p.start(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("restart: %w", err)
}

// Log returns everything the process (and its earlier runs) wrote to stdout
// and stderr.
func (p *Process) Log() string { return p.log.String() }

// Query sends one query to the process over UDP and returns the answer.
// The timeout comes from ctx (2 s if ctx has no deadline).
func (p *Process) Query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	timeout := 2 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	c := &dns.Client{Net: "udp", Timeout: timeout}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.ExchangeContext(ctx, q, p.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("%s: query %s: %w", p.Vendor, name, err)
	}
	return r, nil
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers and readers.
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
