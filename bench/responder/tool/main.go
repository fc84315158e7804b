// Command tool is the helper of the GSLB responder benchmark
// (bench/responder/run.sh, mem.sh). It has four subcommands:
//
//	tool config -dir DIR [-names N] [-static N] [-regions R] [-prefixes P] [-form inline|service] [-lb-port P] [-gd-port P] [-mon-port P] [-interval S]
//	tool queries -out FILE [-n N] [-zone Z] [-dyn N] [-static N] [-regions R] [-prefixes P] [-mix M] [-seed S]
//	tool listen ADDR:PORT
//	tool check [-server ADDR:PORT] [-n N] [-names N] [-regions R] [-prefixes P] [-seed S]
//
// check asks a server of config's layout a sample of its dynamic names
// and exits 1 on the first answer that is not the client's pool (see
// check.go): run.sh runs it after every round.
//
// config writes one description's configurations for both servers:
// lbdnsd's DIR/lbdns.toml (and DIR/nets/ with -prefixes), gdnsd's
// DIR/gdnsd/ (see layout in config.go).
//
// queries writes N queries in dnsperf's binary input format (dnsperf -B:
// each a 2-byte length and the message, as over TCP), so that each query
// carries its own EDNS options: dnsperf's -E would put the same option
// in every query. The mix: 70 % dynamic names (dynK.Z, A or AAAA half
// and half; 30 % of them with an EDNS Client Subnet option, a /24 of a
// region's network), 20 % static names (sK.Z, A), 10 % NXDOMAIN
// (nx-RANDOM.Z, A). Every query has EDNS0 with a 1,232-byte payload. The
// ECS networks are those run.sh maps: 10.R.0.0/16 for region R of
// 0..regions-1, or with -prefixes P the P /24s of the big topology
// (prefix i is 1.0.0.0/24 + i × 256, as run.sh writes them). It prints
// the mix on stdout. -mix realistic asks the dynamic names by Zipf
// popularity (s = 1.1: dyn0 the most asked) with ECS on every dynamic
// query; -mix hostile puts a distinct ECS /24 on every dynamic query (the
// map's /24s in a random order, each once before any again; 65,536 /24s
// of 10/8 without -prefixes), so that no reply is asked twice; -mix
// friendly (the default) is the mix above.
//
// listen accepts TCP connections on ADDR:PORT and closes them at once:
// the one listener every member's tcp monitor (lbdnsd's and gdnsd's
// tcp_connect) connects to, on a wildcard address. It prints "ready" and
// runs until SIGTERM or SIGINT.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/miekg/dns"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tool config|queries|listen|check ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "config":
		err = config(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	case "queries":
		err = queries(os.Args[2:])
	case "listen":
		err = listen(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tool: %v\n", err)
		os.Exit(1)
	}
}

// mix counts the queries written by kind.
type mix struct{ dynA, dynAAAA, ecs, static, nx int }

func queries(args []string) error {
	fs := flag.NewFlagSet("queries", flag.ContinueOnError)
	out := fs.String("out", "", "output file (dnsperf -B format)")
	n := fs.Int("n", 200000, "number of queries")
	zone := fs.String("zone", "bench.test", "zone")
	dyn := fs.Int("dyn", 100, "dynamic names dyn0..dynN-1")
	static := fs.Int("static", 100, "static names s0..sN-1")
	regions := fs.Int("regions", 8, "regions: ECS from 10.R.0.0/16")
	prefixes := fs.Int("prefixes", 0, "ECS from these many /24s from 1.0.0.0 (0: the regions' networks)")
	seed := fs.Uint64("seed", 1, "random seed")
	mixName := fs.String("mix", "friendly", "friendly (names and ECS uniform, 30% of dynamic queries with ECS), realistic (Zipf names, ECS on every dynamic query) or hostile (every dynamic query a distinct ECS /24)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n < 1 || *dyn < 1 || *static < 1 || *regions < 1 || *regions > 256 {
		return errors.New("queries: -out is required; -n, -dyn, -static at least 1, -regions 1..256")
	}
	var zipf *rand.Zipf
	switch *mixName {
	case "friendly", "hostile":
	case "realistic":
		zipf = rand.NewZipf(rand.New(rand.NewPCG(*seed, 11)), 1.1, 1, uint64(*dyn-1))
	default:
		return fmt.Errorf("queries: -mix %q: want friendly, realistic or hostile", *mixName)
	}
	hostile := *mixName == "hostile"
	perm := rand.New(rand.NewPCG(*seed, 13)).Perm(max(1, *prefixes)) // hostile: each /24 once, then again
	f, err := os.Create(*out)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(*seed, 7))
	var m mix
	buf := make([]byte, 0, 512)
	for i := range *n {
		q := new(dns.Msg)
		q.Id = uint16(i)
		r := rng.IntN(100)
		ecs := false
		switch {
		case r < 70:
			t := dns.TypeA
			if rng.IntN(2) == 1 {
				t = dns.TypeAAAA
				m.dynAAAA++
			} else {
				m.dynA++
			}
			k := rng.IntN(*dyn)
			if zipf != nil {
				k = int(zipf.Uint64()) // popular names first: dyn0 the most asked
			}
			q.SetQuestion(fmt.Sprintf("dyn%d.%s.", k, *zone), t)
			ecs = zipf != nil || hostile || rng.IntN(10) < 3
		case r < 90:
			q.SetQuestion(fmt.Sprintf("s%d.%s.", rng.IntN(*static), *zone), dns.TypeA)
			m.static++
		default:
			q.SetQuestion(fmt.Sprintf("nx-%08x.%s.", rng.Uint32(), *zone), dns.TypeA)
			m.nx++
		}
		q.RecursionDesired = false
		q.SetEdns0(1232, false)
		if ecs {
			m.ecs++
			var a net.IP
			switch {
			case hostile && *prefixes > 0:
				p := uint32(0x01000000) + uint32(perm[m.ecs%len(perm)])<<8
				a = net.IPv4(byte(p>>24), byte(p>>16), byte(p>>8), 0)
			case hostile:
				a = net.IPv4(10, byte(m.ecs>>8), byte(m.ecs), 0) // 65,536 distinct /24s of 10/8
			case *prefixes > 0:
				p := uint32(0x01000000) + uint32(rng.IntN(*prefixes))<<8
				a = net.IPv4(byte(p>>24), byte(p>>16), byte(p>>8), 0)
			default:
				a = net.IPv4(10, byte(rng.IntN(*regions)), byte(rng.IntN(256)), 0)
			}
			opt := q.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: a.To4()})
		}
		b, err := q.PackBuffer(buf)
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("pack: %w", err)
		}
		var l [2]byte
		binary.BigEndian.PutUint16(l[:], uint16(len(b)))
		_, _ = w.Write(l[:])
		_, _ = w.Write(b)
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	pct := func(k int) float64 { return 100 * float64(k) / float64(*n) }
	fmt.Printf("%d queries: dynamic %.1f%% (A %.1f%%, AAAA %.1f%%; with ECS %.1f%% of all, %.1f%% of dynamic), static %.1f%%, NXDOMAIN %.1f%%\n",
		*n, pct(m.dynA+m.dynAAAA), pct(m.dynA), pct(m.dynAAAA), pct(m.ecs), 100*float64(m.ecs)/float64(max(1, m.dynA+m.dynAAAA)), pct(m.static), pct(m.nx))
	return nil
}

func listen(args []string) error {
	if len(args) != 1 {
		return errors.New("listen: want one ADDR:PORT")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := net.Listen("tcp", args[0])
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	fmt.Println("ready", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		_ = c.Close()
	}
}
