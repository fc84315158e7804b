// Command responder is the loopback DNS back end of the health-engine
// benchmark (bench/health/run.sh): healthbench.Responder on one loopback
// address and a range of UDP ports.
//
// Usage:
//
//	responder -addr 127.0.0.1 -ports 20000-24999 [-skip 20003,20013]
//
// The skipped ports are served by other responder processes, which the
// benchmark kills or stops to play a failed back end. Once every socket is
// bound it prints "ready N" (N sockets) on stdout; it runs until SIGTERM or
// SIGINT; SIGUSR1 prints "queries N", the datagrams received so far.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	healthbench "lbdns/bench/health"
)

func main() {
	addr := flag.String("addr", "127.0.0.1", "loopback address to listen on")
	ports := flag.String("ports", "", "port range LO-HI or a single port")
	skip := flag.String("skip", "", "comma-separated ports in the range not to listen on")
	flag.Parse()
	if err := run(*addr, *ports, *skip); err != nil {
		fmt.Fprintf(os.Stderr, "responder: %v\n", err)
		os.Exit(1)
	}
}

func run(addrText, portsText, skipText string) error {
	ip, err := netip.ParseAddr(addrText)
	if err != nil {
		return fmt.Errorf("parse -addr: %w", err)
	}
	lo, hi, err := parseRange(portsText)
	if err != nil {
		return err
	}
	skip := map[uint16]bool{}
	for f := range strings.SplitSeq(skipText, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.ParseUint(f, 10, 16)
		if err != nil {
			return fmt.Errorf("parse -skip %q: %w", f, err)
		}
		skip[uint16(p)] = true
	}
	r, err := healthbench.Listen(ip, lo, hi, skip)
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGUSR1 prints the queries received so far ("queries N").
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	fmt.Printf("ready %d\n", r.Len())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-usr1:
			fmt.Printf("queries %d\n", r.Queries())
		}
	}
}

// parseRange parses "LO-HI" or "P".
func parseRange(s string) (lo, hi uint16, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	l, err := strconv.ParseUint(a, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("parse -ports %q: %w", s, err)
	}
	h, err := strconv.ParseUint(b, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("parse -ports %q: %w", s, err)
	}
	return uint16(l), uint16(h), nil
}
