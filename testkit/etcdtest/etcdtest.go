// Package etcdtest starts a real etcd cluster for tests: three members
// on loopback, TLS between the members and to the clients, client
// certificates as the only way in (etcd's client-certificate auth: the
// certificate's common name is the user), auth enabled, and users whose
// role is limited to one key prefix. The certificates come from a
// throwaway CA made for the cluster.
//
// The etcd binary is $LBDNS_ETCD, else the one scripts/build-etcd.sh
// builds from etcd's Go module into the cache directory, else an etcd
// on PATH of version 3.5 or later (Debian 12's 3.4.23 is end of life and
// lacks watch fixes: it is not used). When none is found a test skips,
// unless LBDNS_REQUIRE_ETCD=1, when it fails.
package etcdtest

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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"lbdns/configs"
)

// Version is the etcd release scripts/build-etcd.sh builds.
const Version = "v3.6.16"

// Required reports whether the environment demands a real etcd
// (LBDNS_REQUIRE_ETCD=1): a test that cannot have one then fails.
func Required() bool { return os.Getenv("LBDNS_REQUIRE_ETCD") == "1" }

// Find returns the etcd binary, or an error saying how to get one.
func Find() (string, error) {
	if p := os.Getenv("LBDNS_ETCD"); p != "" {
		return p, checkVersion(p)
	}
	cache := os.Getenv("LBDNS_ETCD_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err == nil {
			cache = filepath.Join(dir, "lbdns")
		}
	}
	if cache != "" {
		p := filepath.Join(cache, "etcd-"+Version, "etcd")
		if _, err := os.Stat(p); err == nil {
			return p, checkVersion(p)
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		if err := checkVersion(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("etcdtest: no etcd %s or later found: run scripts/build-etcd.sh (it builds etcd %s from its Go module), or set LBDNS_ETCD to an etcd binary", "3.5", Version)
}

// checkVersion refuses an etcd older than 3.5.
func checkVersion(bin string) error {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return fmt.Errorf("etcdtest: %s --version: %w", bin, err)
	}
	m := regexp.MustCompile(`etcd Version: (\d+)\.(\d+)\.`).FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("etcdtest: %s --version: no version in %q", bin, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < 3 || major == 3 && minor < 5 {
		return fmt.Errorf("etcdtest: %s is etcd %s.%s: 3.5 or later is needed (3.4 lacks watch fixes)", bin, m[1], m[2])
	}
	return nil
}

// Cluster is a running etcd cluster.
type Cluster struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	// CA issued every certificate of the cluster.
	CA *CA

	dir     string
	command func(name string, args ...string) *exec.Cmd
	members []*member
	root    *clientv3.Client

	mu    sync.Mutex
	users map[string]bool

	// proxies are the members' peer proxies (none with Options.Command).
	proxies []*peerProxy
	// cutMu guards cut (the members partitioned from their peers) and
	// the members' processes, which the proxies look up.
	cutMu sync.Mutex
	cut   map[int]bool
}

type member struct {
	name string
	bin  string
	args []string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// Start starts a cluster of size members in dir (their data, logs and
// certificates), waits until it serves, and enables auth with a root
// user. Close stops it.
func Start(dir string, size int) (*Cluster, error) { return StartWith(dir, size, Options{}) }

// Options place a cluster elsewhere than on loopback.
type Options struct {
	// Addr is the IP address the members listen on (clients and
	// peers) and their certificates are valid for. Default 127.0.0.1.
	Addr netip.Addr
	// Command makes the command that runs a member (default
	// exec.Command); a test runs the members in a network namespace
	// of its own with it.
	Command func(name string, args ...string) *exec.Cmd
}

// StartWith is Start with the members placed by o.
func StartWith(dir string, size int, o Options) (*Cluster, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	ca, err := NewCA(dir, "ca")
	if err != nil {
		return nil, err
	}
	if !o.Addr.IsValid() {
		o.Addr = netip.MustParseAddr("127.0.0.1")
	}
	if !o.Addr.IsLoopback() {
		ca.IPs = append(ca.IPs, net.IP(o.Addr.AsSlice()))
	}
	proxied := o.Command == nil // the peer proxies run on this host's loopback
	if o.Command == nil {
		o.Command = exec.Command
	}
	c := &Cluster{CA: ca, dir: dir, users: map[string]bool{}, command: o.Command, cut: map[int]bool{}}
	ports, err := freePorts(3 * size)
	if err != nil {
		return nil, err
	}
	host := netip.AddrPortFrom(o.Addr, 0).String()
	host = host[:len(host)-2] // "IP" or "[IPv6]"
	// Each member listens for its peers on ports[3i+1]; they reach it
	// there, or through its proxy on ports[3i+2] (PartitionPeers).
	var initial []string
	advertised := func(i int) string {
		if proxied {
			return fmt.Sprintf("https://%s:%d", host, ports[3*i+2])
		}
		return fmt.Sprintf("https://%s:%d", host, ports[3*i+1])
	}
	for i := range size {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, advertised(i)))
		c.Endpoints = append(c.Endpoints, fmt.Sprintf("https://%s:%d", host, ports[3*i]))
	}
	if proxied {
		for i := range size {
			p, err := startPeerProxy(c, i, fmt.Sprintf("%s:%d", host, ports[3*i+2]), fmt.Sprintf("%s:%d", host, ports[3*i+1]))
			if err != nil {
				c.Close()
				return nil, err
			}
			c.proxies = append(c.proxies, p)
		}
	}
	for i := range size {
		name := fmt.Sprintf("m%d", i)
		cert, key, err := ca.Issue(name, name)
		if err != nil {
			c.Close()
			return nil, err
		}
		client, peer := c.Endpoints[i], fmt.Sprintf("https://%s:%d", host, ports[3*i+1])
		args := []string{
			"--name", name, "--data-dir", filepath.Join(dir, name+".data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", advertised(i),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "lbdns-test",
			"--client-cert-auth", "--trusted-ca-file", ca.File, "--cert-file", cert, "--key-file", key,
			"--peer-client-cert-auth", "--peer-trusted-ca-file", ca.File, "--peer-cert-file", cert, "--peer-key-file", key,
			"--heartbeat-interval", "50", "--election-timeout", "500",
			"--log-level", "warn",
		}
		m, err := c.startMember(bin, name, filepath.Join(dir, name+".log"), args)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.cutMu.Lock()
		c.members = append(c.members, m)
		c.cutMu.Unlock()
	}
	if err := c.setup(); err != nil {
		err = fmt.Errorf("%w\n%s", err, c.Logs())
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startMember(bin, name, logPath string, args []string) (*member, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	cmd := c.command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("etcdtest: start %s: %w", name, err)
	}
	m := &member{name: name, bin: bin, args: args, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(m.done) }()
	return m, nil
}

// freePorts returns n TCP ports free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// setup waits for the cluster to serve, then makes the root user (by
// certificate) and enables auth.
func (c *Cluster) setup() error {
	cert, key, err := c.CA.Issue("root", "root")
	if err != nil {
		return err
	}
	root, err := c.client(cert, key)
	if err != nil {
		return err
	}
	c.root = root
	var last error
	for range 150 { // up to about 30 s for the members to elect a leader
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, last = root.Get(ctx, "/etcdtest/ready")
		cancel()
		if last == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last != nil {
		return fmt.Errorf("etcdtest: cluster not serving: %w", last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := root.RoleAdd(ctx, "root"); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("etcdtest: role root: %w", err)
	}
	if _, err := root.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		return fmt.Errorf("etcdtest: user root: %w", err)
	}
	if _, err := root.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("etcdtest: grant root: %w", err)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcdtest: auth enable: %w", err)
	}
	return nil
}

// client connects with the certificate and key files given.
func (c *Cluster) client(cert, key string) (*clientv3.Client, error) {
	tlsInfo := transport.TLSInfo{TrustedCAFile: c.CA.File, CertFile: cert, KeyFile: key}
	tc, err := tlsInfo.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcdtest: tls: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: client: %w", err)
	}
	return cli, nil
}

// Root returns a client of the root user (for what the tests do behind
// lbdns's back: compaction, looking at keys).
func (c *Cluster) Root() *clientv3.Client { return c.root }

// Creds are a user's certificate files.
type Creds struct {
	User                      string
	CAFile, CertFile, KeyFile string
}

// User makes the etcd user name (a certificate with that common name,
// no password; a name already made gets a suffix, for go test -count)
// with a role of its own that may read and write the keys under prefix
// and nothing else, and returns its certificate files.
func (c *Cluster) User(name, prefix string) (Creds, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 2; c.users[name]; i++ {
		if base, _, _ := strings.Cut(name, "~"); !c.users[fmt.Sprintf("%s~%d", base, i)] {
			name = fmt.Sprintf("%s~%d", base, i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	role := "role-" + name
	if _, err := c.root.RoleAdd(ctx, role); err != nil {
		return Creds{}, fmt.Errorf("etcdtest: role %s: %w", role, err)
	}
	if _, err := c.root.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return Creds{}, fmt.Errorf("etcdtest: grant %s: %w", role, err)
	}
	if _, err := c.root.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		return Creds{}, fmt.Errorf("etcdtest: user %s: %w", name, err)
	}
	if _, err := c.root.UserGrantRole(ctx, name, role); err != nil {
		return Creds{}, fmt.Errorf("etcdtest: grant %s to %s: %w", role, name, err)
	}
	cert, key, err := c.CA.Issue("user-"+name, name)
	if err != nil {
		return Creds{}, err
	}
	c.users[name] = true
	return Creds{User: name, CAFile: c.CA.File, CertFile: cert, KeyFile: key}, nil
}

// Fleet returns the [fleet] table of node name at location loc, with
// the cluster's endpoints, the key prefix and the user's certificates,
// and the defaults of configs but a lease TTL of ttl.
func (c *Cluster) Fleet(cr Creds, prefix, name, loc string, ttl time.Duration) *configs.Fleet {
	return &configs.Fleet{
		Endpoints: c.Endpoints, Name: name, Location: loc, Prefix: prefix,
		LeaseTTL: configs.Duration{Duration: ttl}, DialTimeout: configs.Duration{Duration: configs.DefaultFleetDialTimeout},
		ResyncInterval: configs.Duration{Duration: configs.DefaultFleetResyncInterval},
		CAFile:         cr.CAFile, CertFile: cr.CertFile, KeyFile: cr.KeyFile,
	}
}

// Compact compacts the cluster's history up to its current revision and
// returns that revision: a watch from before it gets ErrCompacted.
func (c *Cluster) Compact(ctx context.Context) (int64, error) {
	resp, err := c.root.Get(ctx, "/etcdtest/compact")
	if err != nil {
		return 0, fmt.Errorf("etcdtest: compact: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.root.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcdtest: compact %d: %w", rev, err)
	}
	return rev, nil
}

// StopMember stops member i (SIGKILL: as a crash or a cut cable would)
// and waits until it is gone.
func (c *Cluster) StopMember(i int) {
	m := c.members[i]
	m.cmd.Process.Kill()
	<-m.done
}

// StartMember starts member i again, stopped by StopMember, on its data.
func (c *Cluster) StartMember(i int) error {
	m := c.members[i]
	log, err := os.OpenFile(m.log.Name(), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	m.log.Close()
	cmd := c.command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("etcdtest: start %s: %w", m.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c.cutMu.Lock()
	m.cmd, m.log, m.done = cmd, log, done
	c.cutMu.Unlock()
	return nil
}

// Logs returns the tail of every member's log, for failure messages.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	for _, m := range c.members {
		data, _ := os.ReadFile(m.log.Name())
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- etcd %s log (tail):\n%s\n", m.name, data)
	}
	return b.String()
}

// stopBudget is how long Close waits for a member to stop on SIGTERM.
// etcd's own shutdown may take this long: each client server waits up
// to its request timeout (5 s + two election timeouts) for open streams,
// among them a connection whose client vanished behind a cut and was
// never closed, and a leader then tries to hand its leadership over for
// as long again.
const stopBudget = 45 * time.Second

// Close stops every member: SIGTERM to all at once (a leader stopped
// alone waits for a live peer to take the leadership over), then
// SIGKILL to one still running after stopBudget.
func (c *Cluster) Close() error {
	if c.root != nil {
		c.root.Close()
	}
	var errs []error
	for _, m := range c.members {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopBudget)
	defer cancel()
	for _, m := range c.members {
		select {
		case <-m.done:
		case <-ctx.Done():
			m.cmd.Process.Kill()
			<-m.done
			errs = append(errs, fmt.Errorf("etcdtest: %s did not stop on SIGTERM", m.name))
		}
		m.log.Close()
	}
	for _, p := range c.proxies {
		p.close()
	}
	return errors.Join(errs...)
}

// Shared is one cluster shared by a test binary's tests: TestMain calls
// Run, each test Cluster.
type Shared struct {
	c   *Cluster
	err error
}

// Run starts a three-member cluster in a temporary directory, runs
// run (leakcheck.Run or m.Run), stops the cluster and removes the
// directory, and returns run's code. When the cluster cannot start the
// tests still run: Cluster skips or fails each.
func (s *Shared) Run(run func() int) int {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		s.err = err
		return run()
	}
	defer os.RemoveAll(dir)
	s.c, s.err = Start(dir, 3)
	code := run()
	if s.c != nil {
		if err := s.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Cluster returns the shared cluster, or skips t saying why there is
// none (fails it when Required).
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	if s.c == nil {
		err := s.err
		if err == nil {
			err = errors.New("etcdtest: Shared.Run was not called from TestMain")
		}
		if Required() {
			t.Fatalf("a real etcd is required (LBDNS_REQUIRE_ETCD=1): %v", err)
		}
		t.Skipf("no etcd cluster for this test: %v", err)
	}
	return s.c
}

// StartT starts a cluster of size members for t alone, stopped when t
// ends; when etcd cannot be had it skips t, or fails it when Required.
func StartT(t testing.TB, size int) *Cluster {
	t.Helper()
	c, err := Start(t.TempDir(), size)
	if err != nil {
		if Required() {
			t.Fatalf("a real etcd is required (LBDNS_REQUIRE_ETCD=1): %v", err)
		}
		t.Skipf("no etcd cluster for this test: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// MemberLeader returns the member that member i follows as its leader
// (itself when it leads), or -1 when it has none (cut off from a
// quorum, or electing), as member i's own status says.
func (c *Cluster) MemberLeader(ctx context.Context, i int) (int, error) {
	resp, err := c.root.Status(ctx, c.Endpoints[i])
	if err != nil {
		return -1, fmt.Errorf("etcdtest: status of m%d: %w", i, err)
	}
	if resp.Leader == 0 {
		return -1, nil
	}
	for j, ep := range c.Endpoints { // a member's status names its own ID
		if j == i {
			if resp.Header.MemberId == resp.Leader {
				return i, nil
			}
			continue
		}
		sj, err := c.root.Status(ctx, ep)
		if err != nil {
			return -1, fmt.Errorf("etcdtest: status of m%d: %w", j, err)
		}
		if sj.Header.MemberId == resp.Leader {
			return j, nil
		}
	}
	return -1, fmt.Errorf("etcdtest: m%d follows %x, none of the members", i, resp.Leader)
}
