// Command responder is the loopback back end of the GSLB monitor benchmark
// (bench/gslb/run.sh): one process serving many TCP and HTTP members, each
// a listener on its own loopback address, that counts what it is sent, so
// the benchmark counts checks instead of assuming them.
//
// Usage:
//
//	responder -tcp tcp.txt -tcp-port 8080 -http http.txt -http-port 80 [-ctrl 127.0.0.1:0]
//
// The files list one loopback IPv4 address a line. (HTTP members are on
// port 80 by default because lbdnsd's http check probes a GSLB member on
// port 80, its address having no port.) A TCP member accepts a
// connection, counts it and closes it; an HTTP member answers any request
// "200 ok" and counts it. The control listener (HTTP, loopback) serves
//
//	GET /counts          {"tcp": N, "http": M}: totals since start
//	GET /close?addr=A    closes the TCP member A's listener (connections
//	                     to it are then refused), as a dead member
//	GET /open?addr=A     opens it again
//
// Once every listener is open it prints "ready N" (N listeners) on stdout;
// it runs until SIGTERM or SIGINT.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	tcpPort := flag.Int("tcp-port", 8080, "port of the TCP members")
	httpPort := flag.Int("http-port", 80, "port of the HTTP members")
	tcpFile := flag.String("tcp", "", "file of TCP member addresses, one a line")
	httpFile := flag.String("http", "", "file of HTTP member addresses, one a line")
	ctrl := flag.String("ctrl", "127.0.0.1:0", "loopback address of the control listener")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *tcpPort, *httpPort, *tcpFile, *httpFile, *ctrl); err != nil {
		fmt.Fprintf(os.Stderr, "responder: %v\n", err)
		os.Exit(1)
	}
}

// server holds the members' listeners and counters.
type server struct {
	tcpConns atomic.Int64
	httpReqs atomic.Int64

	port int // of the TCP members

	mu  sync.Mutex
	tcp map[netip.Addr]net.Listener // open TCP members
}

func run(ctx context.Context, tcpPort, httpPort int, tcpFile, httpFile, ctrl string) error {
	for _, p := range []int{tcpPort, httpPort} {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("port %d: want 1..65535", p)
		}
	}
	tcpAddrs, err := readAddrs(tcpFile)
	if err != nil {
		return err
	}
	httpAddrs, err := readAddrs(httpFile)
	if err != nil {
		return err
	}
	s := &server{port: tcpPort, tcp: make(map[netip.Addr]net.Listener, len(tcpAddrs))}
	var all []net.Listener
	defer func() {
		for _, l := range all {
			_ = l.Close()
		}
	}()
	listen := func(a netip.Addr, port int) (net.Listener, error) {
		l, err := net.Listen("tcp4", netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		all = append(all, l)
		return l, nil
	}
	for _, a := range tcpAddrs {
		l, err := listen(a, tcpPort)
		if err != nil {
			return err
		}
		s.tcp[a] = l
		go s.acceptTCP(l)
	}
	web := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			s.httpReqs.Add(1)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok\n"))
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       5 * time.Second,
	}
	for _, a := range httpAddrs {
		l, err := listen(a, httpPort)
		if err != nil {
			return err
		}
		go func() { _ = web.Serve(l) }()
	}
	cl, err := net.Listen("tcp4", ctrl)
	if err != nil {
		return fmt.Errorf("listen control: %w", err)
	}
	all = append(all, cl)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /counts", s.counts)
	mux.HandleFunc("GET /close", s.closeMember)
	mux.HandleFunc("GET /open", s.openMember)
	cs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = cs.Serve(cl) }()
	fmt.Printf("ready %d control %s\n", len(all)-1, cl.Addr())
	<-ctx.Done()
	_ = cs.Close()
	_ = web.Close()
	return nil
}

// acceptTCP counts and closes every connection accepted on l until l is
// closed.
func (s *server) acceptTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		s.tcpConns.Add(1)
		_ = c.Close()
	}
}

func (s *server) counts(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{
		"tcp":  s.tcpConns.Load(),
		"http": s.httpReqs.Load(),
	})
}

func (s *server) closeMember(w http.ResponseWriter, r *http.Request) {
	a, err := netip.ParseAddr(r.URL.Query().Get("addr"))
	if err != nil {
		http.Error(w, "addr: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	l, ok := s.tcp[a]
	delete(s.tcp, a)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no open TCP member "+a.String(), http.StatusNotFound)
		return
	}
	if err := l.Close(); err != nil {
		http.Error(w, "close: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = fmt.Fprintf(w, "closed %s\n", a)
}

func (s *server) openMember(w http.ResponseWriter, r *http.Request) {
	a, err := netip.ParseAddr(r.URL.Query().Get("addr"))
	if err != nil {
		http.Error(w, "addr: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tcp[a]; ok {
		http.Error(w, "TCP member already open "+a.String(), http.StatusConflict)
		return
	}
	l, err := net.Listen("tcp4", netip.AddrPortFrom(a, uint16(s.port)).String())
	if err != nil {
		http.Error(w, "listen: "+err.Error(), http.StatusInternalServerError)
		return
	}
	s.tcp[a] = l
	go s.acceptTCP(l)
	_, _ = fmt.Fprintf(w, "opened %s\n", a)
}

// readAddrs reads one IPv4 loopback address a line ("" reads nothing).
func readAddrs(name string) ([]netip.Addr, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read addresses: %w", err)
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		a, err := netip.ParseAddr(sc.Text())
		if err != nil || !a.Is4() || !a.IsLoopback() {
			return nil, fmt.Errorf("%s:%d: %q is not an IPv4 loopback address", name, n, sc.Text())
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}
