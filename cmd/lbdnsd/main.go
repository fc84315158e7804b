// Command lbdnsd health-checks the recursive resolvers behind DNS VIPs and
// programs Linux IPVS so that only resolvers that answer correctly receive
// traffic.
//
// Usage:
//
//	lbdnsd -config /etc/lbdns/lbdns.toml [-dry-run] [-log-format text|json] [-discard-bad-state]
//	lbdnsd -check-config FILE
//	lbdnsd -version
//
// Operators talk to the running daemon with lbctl over the control socket
// (daemon.control_socket); dashboards read GET /status, /metrics and the
// status page on daemon.status_listen.
//
// SIGHUP reloads the configuration (a bad one is rejected whole and the
// running one stays); SIGTERM and SIGINT stop the daemon without touching
// the IPVS table.
//
// Under systemd (packaging/systemd/lbdnsd.service, Type=notify) it tells
// systemd READY once its loop runs, RELOADING and READY around a reload,
// STOPPING, and feeds WatchdogSec only while its main loop is alive (see
// internal/sdnotify).
//
// For profiling, LBDNS_CPUPROFILE=FILE writes a Go CPU profile of the whole
// run to FILE, and LBDNS_MEMPROFILE=FILE the allocations of the whole run
// and the heap in use (pprof's allocs profile) to FILE when lbdnsd stops
// (read them with go tool pprof); unset, nothing is profiled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"lbdns/configs"
	"lbdns/daemon"
	"lbdns/gslb/topology"
	"lbdns/internal/buildinfo"
	"lbdns/internal/sdnotify"
	"lbdns/responder/doh"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lbdnsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/lbdns/lbdns.toml", "configuration file")
	check := fs.String("check-config", "", "validate this configuration file, print the result and exit")
	dryRun := fs.Bool("dry-run", false, "run the checks and compute the IPVS table without applying it (no IPVS or root needed)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	discard := fs.Bool("discard-bad-state", false, "if a state file (operator overrides) cannot be parsed, move it aside (a copy is kept) and start without it, instead of refusing to start")
	version := fs.Bool("version", false, "print lbdnsd's version (module version and VCS revision) and exit")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "Usage of lbdnsd:")
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "lbdnsd: %s\nUsage: lbdnsd [-config FILE] [-dry-run] [-log-format text|json] [-discard-bad-state] | -check-config FILE | -version ('lbdnsd -h' lists the flags)\n", flagError(fs, err))
		return 2
	}
	if *version {
		fmt.Fprintf(stdout, "lbdnsd %s\n", buildinfo.Version())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lbdnsd: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	if *check != "" {
		return checkConfig(*check, stdout, stderr)
	}

	level := new(slog.LevelVar)
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, hopts)
	case "json":
		h = slog.NewJSONHandler(stderr, hopts)
	default:
		fmt.Fprintf(stderr, "lbdnsd: -log-format must be text or json, not %q\n", *logFormat)
		return 2
	}
	log := slog.New(h)

	if path := os.Getenv("LBDNS_CPUPROFILE"); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "lbdnsd: LBDNS_CPUPROFILE: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	if path := os.Getenv("LBDNS_MEMPROFILE"); path != "" {
		defer func() {
			if err := writeMemProfile(path); err != nil {
				fmt.Fprintf(stderr, "lbdnsd: LBDNS_MEMPROFILE: %v\n", err)
			}
		}()
	}

	notifier, err := sdnotify.New(sdnotify.Options{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "lbdnsd: %v\n", err)
		return 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := daemon.New(daemon.Options{ConfigPath: *cfgPath, DryRun: *dryRun, Logger: log, LogLevel: level,
		DiscardBadState: *discard, Registry: reg, Notifier: notifier})
	if err != nil {
		fmt.Fprintf(stderr, "lbdnsd: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	notified := make(chan struct{})
	go func() { notifier.Run(ctx); close(notified) }() // pings, then STOPPING=1 once ctx is done
	defer func() { stop(); <-notified }()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// A rejected config is logged (every problem) by the
				// daemon itself; only other failures are logged here.
				if err := d.Reload(ctx); err != nil && !errors.Is(err, context.Canceled) && configs.Problems(err) == nil {
					log.Error("SIGHUP reload failed", "err", err)
				}
			}
		}
	}()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "lbdnsd: %v\n", err)
		return 1
	}
	return 0
}

// checkConfig validates the file at path as a start would (the
// configuration, the checkers of its targets, the responder's network
// map, its TLS certificate): exit 0 with its summary on stdout, and every warning (a key
// without effect) on stderr, each "warning: FILE:LINE: KEY: ..."; exit 1
// with every problem on stderr.
func checkConfig(path string, stdout, stderr io.Writer) int {
	cfg, err := configs.Load(path)
	if err == nil {
		err = daemon.CheckTargets(cfg)
	}
	if err == nil {
		// The responder's network map: its prefix files and database are
		// read as a start or reload would read them.
		_, err = topology.Load(cfg)
	}
	if err == nil && cfg.GSLB.TLS.On() {
		// The encrypted fronts' certificate and key, read as a start
		// would read them.
		t := cfg.GSLB.TLS
		if err = doh.CheckPair(t.CertFile, t.KeyFile); err != nil {
			err = fmt.Errorf("gslb.tls cert_file %q, key_file %q: %w", t.CertFile, t.KeyFile, err)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Error())
	}
	fmt.Fprintln(stdout, cfg.Summary()+gslbSummary(cfg))
	return 0
}

// gslbSummary is what the configuration's responder serves, for the
// -check-config summary: ", responder on ADDR..., N gslb zones (Z...), M gslb
// names", or "" without zones, names or listen addresses.
func gslbSummary(cfg *configs.Config) string {
	g := cfg.GSLB
	var s string
	if len(g.Server.Listen) > 0 {
		s += ", responder on " + strings.Join(g.Server.Listen, " ")
		if len(g.TLS.DoHListen) > 0 {
			s += ", doh on " + strings.Join(g.TLS.DoHListen, " ")
		}
		if len(g.TLS.DoTListen) > 0 {
			s += ", dot on " + strings.Join(g.TLS.DoTListen, " ")
		}
	} else if len(g.Zones) > 0 {
		s += ", responder off (no [gslb.server] listen)"
	}
	if n := len(g.Zones); n > 0 {
		names := make([]string, n)
		for i, z := range g.Zones {
			names[i] = z.Name
		}
		s += fmt.Sprintf(", %d gslb zone%s (%s)", n, plural(n), strings.Join(names, " "))
	}
	if n := len(g.Names); n > 0 {
		s += fmt.Sprintf(", %d gslb name%s", n, plural(n))
	}
	return s
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// flagError is the message of a flag parsing error, with the closest flag
// of fs suggested for an unknown one.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !ok {
		return msg
	}
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, "-"+f.Name) })
	return msg + configs.Suggest("-"+name, known)
}

// startCPUProfile writes a CPU profile to path until the returned function
// is called.
// writeMemProfile writes the allocs profile (every allocation sampled
// since the start, and the heap in use) to path.
func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write allocs profile: %w", err)
	}
	return f.Close()
}

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
