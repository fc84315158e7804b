// Command tool is the helper of the GSLB responder benchmark
// (bench/responder/run.sh, mem.sh) and of the DoH benchmark
// (bench/doh/run.sh). It has seven subcommands:
//
//	tool config -dir DIR [-names N] [-static N] [-regions R] [-prefixes P] [-form inline|service|list] [-lb-port P] [-gd-port P] [-mon-port P] [-interval S]
//	tool queries -out PREFIX [-files F] [-n N] [-zone Z] [-dyn N] [-static N] [-regions R] [-prefixes P] [-mix M] [-seed S]
//	tool sent KEYS SENT [KEYS SENT ...]
//	tool check -server ADDR:PORT -queries BIN:SENT[,BIN:SENT...] [-n N] [-regions R] [-prefixes P] [-seed S] [-workers W]
//	tool listen ADDR:PORT
//	tool dohload -url URL -queries BIN [-ca PEM] [-qps Q] [-duration D] [-conns C] [-inflight N] [-method GET|POST] [-new-conn] [-check-every N] [-regions R] [-prefixes P]
//	tool transports -udp ADDR -dot ADDR -doh URL -json URL [-ca PEM] [-n N] [-dyn N] [-static N] [-regions R] [-prefixes P] [-seed S]
//
// config writes one description's configurations for both servers:
// lbdnsd's DIR/lbdns.toml (and DIR/nets/ with -prefixes), gdnsd's
// DIR/gdnsd/ (see layout in config.go).
//
// queries writes N queries of a mix (friendly, realistic or hostile;
// see mixQueries in queries.go) in F files, one per generator, each a
// disjoint slice of one shuffled list: PREFIX.K.bin in dnsperf's binary
// input format (dnsperf -B: each a 2-byte length and the message, as
// over TCP, so that each query carries its own EDNS options; dnsperf's
// -E would put the same option in every query) and PREFIX.K.keys, each
// query's identity (kind, name, type, ECS /24) in 8 bytes. Every query
// has EDNS0 with a 1,232-byte payload. It prints the mix, the distinct
// queries and the expected response codes on stdout.
//
// sent reads the keys of each generator's file and the number of
// queries it sent (dnsperf reads its file from the start and loops) and
// prints "SENT DISTINCT NOERROR NXDOMAIN": the queries sent, the
// distinct ones among them, and the response codes they must get.
//
// check sends a sample of the queries each generator sent (drawn from
// the first SENT queries of each file) to a server of config's layout,
// decodes every reply and exits 1 on the first one that is wrong: the
// response code, the answer (the members of the client's pool, the
// static record, none for NXDOMAIN) or the ECS option (echoed with a
// scope no shorter than the one the map gives; none without ECS in the
// query). See check.go: run.sh runs it after every round.
//
// listen accepts TCP connections on ADDR:PORT and closes them at once:
// the one listener every member's tcp monitor (lbdnsd's and gdnsd's
// tcp_connect) connects to, on a wildcard address. It prints "ready" and
// runs until SIGTERM or SIGINT.
//
// dohload sends DNS over HTTPS at a fixed offered load, over HTTP/2
// connections kept alive or over a new TLS connection per query, and
// prints the queries sent, completed and lost, the response codes, the
// latency (average, p50, p99 of every reply) and its own CPU per query;
// it judges every Nth reply as check does. See dohload.go.
//
// transports sends N queries of the realistic mix to one lbdnsd over
// UDP, TCP, DNS over TLS, DNS over HTTPS and the JSON API, compares the
// answers (rcode, the set of records, the ECS scope) and fails on a
// difference. See transports.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tool config|queries|sent|check|listen|dohload|transports ...")
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
	case "sent":
		err = sent(os.Args[2:])
	case "listen":
		err = listen(os.Args[2:])
	case "dohload":
		err = dohload(os.Args[2:])
	case "transports":
		err = transports(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tool: %v\n", err)
		os.Exit(1)
	}
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
