// Command lbdns-quickstart starts a small real world on loopback and the
// daemon over it, in the foreground:
//
//   - an authoritative DNS server for the zone of the config's dns check
//     (internal/lab/dnstest), the upstream every resolver forwards to;
//   - every resolver of the config whose vendor is one of the real products
//     (unbound, BIND, Knot Resolver, PowerDNS Recursor, dnsmasq), started
//     from the host's Debian packages on its configured address
//     (internal/lab/vendors);
//   - every GSLB member of the config probed on a loopback address by a tcp
//     monitor with a port: a process of this program listening there that
//     writes a banner line to every connection (the monitor's expect), so
//     that `kill -STOP PID` fails the member (its check times out) and
//     `kill -CONT PID` brings it back;
//   - lbdnsd in dry-run mode over the config, in this process (with the
//     GSLB responder when the config has [gslb.server] listen).
//
// Usage:
//
//	go run ./cmd/lbdns-quickstart [-config configs/quickstart.toml] [-install=false]
//
// When a product is missing it runs scripts/install-test-deps.sh --quickstart
// (apt, as root or through sudo: the five products and dig, about 37 MB to
// fetch on a base Debian 12) unless -install=false. Ctrl-C (SIGINT) or SIGTERM
// stops the daemon, kills every resolver and the authoritative, and removes
// their files: nothing keeps running. The resolvers run in process groups
// of their own and die with this program even when it is killed; this
// program stops when its parent does (SIGTERM to `go run` reaches it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/daemon"
	"lbdns/internal/lab/dnstest"
	"lbdns/internal/lab/vendors"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if isMemberArgs(args) {
		return serveMember(args, stdout, stderr)
	}
	fs := flag.NewFlagSet("lbdns-quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "configs/quickstart.toml", "configuration file of the daemon; its resolvers are started on their addresses")
	install := fs.Bool("install", true, "run scripts/install-test-deps.sh when a resolver product is missing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lbdns-quickstart: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	// Stop when the parent stops: SIGTERM to `go run` kills go run only,
	// and without this the program would keep running.
	dieWithParent()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := quickstart(ctx, *cfgPath, *install, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "lbdns-quickstart: %v\n", err)
		return 1
	}
	return 0
}

// world is the config's resolvers to start and the zone they must
// resolve, and the GSLB members to run.
type world struct {
	zone      string
	resolvers []configs.Resolver
	members   []member
}

// plan reads what to start from the config: every resolver of a known
// vendor, and the zone of the first dns check that asks random labels.
func plan(cfg *configs.Config) (world, error) {
	var w world
	names := make([]string, 0, len(cfg.Checks))
	for name := range cfg.Checks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if c := cfg.Checks[name]; c.DNS != nil && c.DNS.Zone != "" {
			w.zone = c.DNS.Zone
			break
		}
	}
	if w.zone == "" {
		return w, errors.New("the config has no dns check with a zone (the authoritative serves that zone)")
	}
	for _, r := range cfg.Resolvers {
		if slices.Contains(vendors.All(), vendors.Vendor(r.Vendor)) {
			w.resolvers = append(w.resolvers, r)
		}
	}
	if len(w.resolvers) == 0 {
		return w, errors.New("the config has no resolver of a vendor this program can start")
	}
	w.members = planMembers(cfg)
	return w, nil
}

// quickstart starts the world and the daemon, and stops all of it when ctx
// is done or the daemon fails.
func quickstart(ctx context.Context, cfgPath string, install bool, stdout, stderr io.Writer) error {
	cfg, err := configs.Load(cfgPath)
	if err != nil {
		return err
	}
	w, err := plan(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := ensureInstalled(w.resolvers, install, stdout, stderr); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "lbdns-quickstart-world-")
	if err != nil {
		return fmt.Errorf("world directory: %w", err)
	}
	defer os.RemoveAll(dir)
	// The products may drop privileges or chdir: keep their files readable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("world directory: %w", err)
	}

	auth := &dnstest.Server{Zone: w.zone, TTL: 30, NegativeTTL: 5}
	if err := auth.Start(); err != nil {
		return fmt.Errorf("authoritative: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		auth.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "quickstart: authoritative for %s on %v\n", w.zone, auth.Addr())

	var procs []*vendors.Process
	var members []*memberProc
	defer func() {
		for _, m := range members {
			m.stop()
		}
		for _, p := range procs {
			if err := p.Kill(); err != nil {
				fmt.Fprintf(stderr, "lbdns-quickstart: %v\n", err)
			}
		}
		fmt.Fprintf(stdout, "quickstart: stopped the daemon, %d resolvers, %d gslb members and the authoritative\n", len(procs), len(members))
	}()
	for _, r := range w.resolvers {
		if ctx.Err() != nil {
			return nil
		}
		rdir := filepath.Join(dir, r.Name)
		if err := os.Mkdir(rdir, 0o755); err != nil {
			return fmt.Errorf("resolver %s: %w", r.Name, err)
		}
		p, err := vendors.Launch(vendors.Vendor(r.Vendor), rdir, r.AddrPort, auth.Addr(), vendors.Options{})
		if err != nil {
			return fmt.Errorf("resolver %s: %w", r.Name, err)
		}
		procs = append(procs, p)
		fmt.Fprintf(stdout, "quickstart: resolver %s (%s) pid %d on %v\n", r.Name, r.Vendor, p.Pid(), r.AddrPort)
	}
	for _, m := range w.members {
		if ctx.Err() != nil {
			return nil
		}
		p, err := startMember(m, stderr)
		if err != nil {
			return err
		}
		members = append(members, p)
		fmt.Fprintf(stdout, "quickstart: gslb member %s/%s pid %d on %s (kill -STOP %d stops it, kill -CONT %d starts it again)\n",
			m.pool, m.name, p.cmd.Process.Pid, joinAddrs(m.listen), p.cmd.Process.Pid, p.cmd.Process.Pid)
	}
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	d, err := daemon.New(daemon.Options{ConfigPath: cfgPath, DryRun: true, Logger: log, LogLevel: level,
		Registry: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	guide(stdout, cfg) // once the daemon holds its sockets: no URL printed for a start that fails
	go reloadOnHUP(ctx, d, log)
	if err := d.Run(ctx); err != nil {
		return err
	}
	return nil
}

// reloadOnHUP reloads the daemon's config on SIGHUP, as lbdnsd does.
func reloadOnHUP(ctx context.Context, d *daemon.Daemon, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := d.Reload(ctx); err != nil && !errors.Is(err, context.Canceled) && configs.Problems(err) == nil {
				log.Error("SIGHUP reload failed", "err", err)
			}
		}
	}
}

// guide prints what to try next.
func guide(w io.Writer, cfg *configs.Config) {
	fmt.Fprintln(w, "quickstart: lbdnsd -dry-run is up (Ctrl-C stops everything)")
	if s := cfg.Daemon.ControlSocket; s != "" {
		fmt.Fprintf(w, "quickstart: status:  go run ./lbctl -socket %s status\n", s)
	}
	if l := cfg.Daemon.StatusListen; l != "" {
		fmt.Fprintf(w, "quickstart: page:    http://%s/\n", l)
	}
	if l := cfg.GSLB.Server.ListenAddrs; len(l) > 0 {
		for _, n := range cfg.GSLB.Names {
			fmt.Fprintf(w, "quickstart: gslb:    dig @%s -p %d %s\n", l[0].Addr(), l[0].Port(), strings.TrimSuffix(n.Name, "."))
			break
		}
	}
}

// joinAddrs is addrs separated by commas.
func joinAddrs(addrs []netip.AddrPort) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// installCommand installs what the quick start runs: the five resolver
// products and dig, not the whole test toolchain.
var installCommand = []string{"sh", "scripts/install-test-deps.sh", "--quickstart"}

// ensureInstalled checks that every product the resolvers need is
// installed, running scripts/install-test-deps.sh once when one is missing
// and install is true.
func ensureInstalled(rs []configs.Resolver, install bool, stdout, stderr io.Writer) error {
	missing := func() []string {
		var m []string
		for _, r := range rs {
			if _, err := vendors.LookPath(vendors.Vendor(r.Vendor)); err != nil && !slices.Contains(m, r.Vendor) {
				m = append(m, r.Vendor)
			}
		}
		return m
	}
	m := missing()
	if len(m) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("resolver products missing: %v (run scripts/install-test-deps.sh --quickstart)", m)
	}
	fmt.Fprintf(stdout, "quickstart: resolver products missing: %v; running %s (apt: about 37 MB to fetch on a base Debian 12)\n", m, strings.Join(installCommand, " "))
	cmd := exec.Command(installCommand[0], installCommand[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("install-test-deps: %w", err)
	}
	if m := missing(); len(m) > 0 {
		return fmt.Errorf("resolver products still missing after install: %v", m)
	}
	return nil
}
