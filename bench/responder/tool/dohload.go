package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// loadConfig is what dohload sends and how.
type loadConfig struct {
	url      string
	qps      int
	duration time.Duration
	conns    int
	inflight int
	method   string
	newConn  bool
	timeout  time.Duration
	every    int
	zone     string
	m        netMap
}

// loadResult counts what a dohload run sent and got.
type loadResult struct {
	sent, completed, lost, httpErrors int
	noerror, nxdomain, other          int
	checked                           int
	lat                               []time.Duration // of the completed queries
	firstErr                          error
}

// dohload sends DNS over HTTPS (HTTP/2 over TLS, RFC 8484) at a fixed
// offered load and prints what it sent and got (see printLoad): the
// keep-alive generator of bench/doh/run.sh. It sends the queries of a
// file in dnsperf's binary format (-B) from its start, round and round,
// each as GET ?dns= (base64url) or POST, with ID 0 (RFC 8484 4.1).
// Keep-alive: -conns HTTP/2 connections opened first, the queries
// spread over them in turn, at most -inflight in flight on each (the
// pacer waits for a free place: a server that cannot keep up is sent
// less than the offered load, and says so in "sent"). -new-conn: each
// query on a new TLS connection of its own (full handshake, no session
// resumption), at most -conns at once. Every -check-every-th reply is
// decoded and judged as tool check judges (answer, rcode, ECS scope).
// dnsperf 2.10's DoH mode cannot be the keep-alive generator: it loses
// a reply whenever two come in one read (its data callback pauses
// nghttp2 and drops the chunk) and the lost ones hold its in-flight
// places until they time out; it sets no TCP_NODELAY either.
func dohload(args []string) error {
	fs := flag.NewFlagSet("dohload", flag.ContinueOnError)
	var c loadConfig
	fs.StringVar(&c.url, "url", "", "the DoH URL (https://127.0.0.1:PORT/dns-query)")
	file := fs.String("queries", "", "query file in dnsperf's binary format (tool queries)")
	ca := fs.String("ca", "", "PEM file of the CA that verifies the server")
	fs.IntVar(&c.qps, "qps", 1000, "offered load, queries per second")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&c.conns, "conns", 4, "keep-alive: HTTP/2 connections; -new-conn: connections at once")
	fs.IntVar(&c.inflight, "inflight", 100, "keep-alive: queries in flight per connection at most")
	fs.StringVar(&c.method, "method", "GET", "GET or POST")
	fs.BoolVar(&c.newConn, "new-conn", false, "a new TLS connection per query")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Second, "a query without its reply after that long is lost")
	fs.IntVar(&c.every, "check-every", 100, "judge every Nth reply (0: none)")
	fs.StringVar(&c.zone, "zone", "bench.test", "zone")
	regions := fs.Int("regions", 8, "regions (for the judge)")
	prefixes := fs.Int("prefixes", 0, "the map's /24s (for the judge)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.url == "" || *file == "" || c.qps < 1 || c.duration <= 0 || c.conns < 1 || c.inflight < 1 || c.every < 0 || (c.method != "GET" && c.method != "POST") {
		return errors.New("dohload: -url and -queries are required; -qps, -conns, -inflight at least 1, -method GET or POST")
	}
	msgs, err := readQueries(*file)
	if err != nil {
		return fmt.Errorf("dohload: %w", err)
	}
	if len(msgs) == 0 {
		return errors.New("dohload: no queries")
	}
	cfg, err := tlsConfig(*ca)
	if err != nil {
		return fmt.Errorf("dohload: %w", err)
	}
	c.m = newNetMap(*regions, *prefixes)
	r, wall, err := runLoad(c, cfg, msgs)
	if err != nil {
		return err
	}
	printLoad(os.Stdout, c, r, wall)
	if r.firstErr != nil {
		return fmt.Errorf("dohload: a wrong reply: %w", r.firstErr)
	}
	return nil
}

// tlsConfig verifies the server with the CAs of the PEM file ca (none:
// the system's), and keeps no session cache (every new connection a
// full handshake).
func tlsConfig(ca string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// h2Transport is an HTTP/2-only transport of cfg.
func h2Transport(cfg *tls.Config) *http.Transport {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Transport{TLSClientConfig: cfg.Clone(), Protocols: &p, ForceAttemptHTTP2: true}
}

// request is the DoH request of wire (its ID set to 0).
func request(ctx context.Context, url, method string, wire []byte) (*http.Request, error) {
	b := slices.Clone(wire)
	b[0], b[1] = 0, 0
	var req *http.Request
	var err error
	if method == "GET" {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, url+"?dns="+base64.RawURLEncoding.EncodeToString(b), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		if req != nil {
			req.Header.Set("Content-Type", "application/dns-message")
		}
	}
	if req != nil {
		req.Header.Set("Accept", "application/dns-message")
	}
	return req, err
}

// roundTripper is what a query is sent over: a kept-alive connection,
// or a function that opens a connection for one query.
type roundTripper interface {
	RoundTrip(*http.Request) (*http.Response, error)
}

// oneShot opens a new connection for each request and closes it after.
type oneShot struct {
	t    *http.Transport
	addr string
}

// RoundTrip sends req over a new connection of its own.
func (o oneShot) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, err := o.t.NewClientConn(req.Context(), "https", o.addr)
	if err != nil {
		return nil, err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	resp.Body = closer{resp.Body, cc}
	return resp, nil
}

// closer closes the connection with the body.
type closer struct {
	io.ReadCloser
	cc *http.ClientConn
}

func (c closer) Close() error {
	err := c.ReadCloser.Close()
	_ = c.cc.Close()
	return err
}

// hostPort is the host:port of an https URL (port 443 by default).
func hostPort(url string) string {
	h := strings.TrimPrefix(url, "https://")
	h, _, _ = strings.Cut(h, "/")
	if !strings.Contains(strings.TrimPrefix(h, "["), ":") || strings.HasSuffix(h, "]") {
		h += ":443"
	}
	return h
}

// runLoad sends c's load and returns what came back and the wall time
// the sending took.
func runLoad(c loadConfig, cfg *tls.Config, msgs [][]byte) (*loadResult, time.Duration, error) {
	t := h2Transport(cfg)
	addr := hostPort(c.url)
	var rts []roundTripper
	var slots []chan struct{}
	if c.newConn {
		rts = []roundTripper{oneShot{t, addr}}
		slots = []chan struct{}{make(chan struct{}, c.conns)}
	} else {
		for range c.conns {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cc, err := t.NewClientConn(ctx, "https", addr)
			cancel()
			if err != nil {
				return nil, 0, fmt.Errorf("dohload: connect %s: %w", addr, err)
			}
			defer func() { _ = cc.Close() }()
			rts = append(rts, cc)
			slots = append(slots, make(chan struct{}, c.inflight))
		}
	}
	total := int(int64(c.qps) * int64(c.duration) / int64(time.Second))
	r := &loadResult{lat: make([]time.Duration, 0, total)}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		done atomic.Int64
	)
	start := time.Now()
	stop, cancel := context.WithDeadline(context.Background(), start.Add(c.duration))
	defer cancel()
	for i := 0; i < total && stop.Err() == nil; i++ {
		due := start.Add(time.Duration(int64(i) * int64(time.Second) / int64(c.qps)))
		if d := time.Until(due); d > 200*time.Microsecond {
			time.Sleep(d)
		}
		k := i % len(rts)
		select {
		case slots[k] <- struct{}{}:
		case <-stop.Done():
		}
		if stop.Err() != nil {
			break
		}
		wire := msgs[i%len(msgs)]
		judgeIt := c.every > 0 && i%c.every == 0
		r.sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots[k] }()
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			sent := time.Now()
			req, err := request(ctx, c.url, c.method, wire)
			var body []byte
			status := 0
			if err == nil {
				var resp *http.Response
				if resp, err = rts[k].RoundTrip(req); err == nil {
					status = resp.StatusCode
					body, err = io.ReadAll(io.LimitReader(resp.Body, 65536))
					_ = resp.Body.Close()
				}
			}
			lat := time.Since(sent)
			done.Add(1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.lost++
				return
			case status != http.StatusOK || len(body) < 12:
				r.httpErrors++
				return
			}
			r.completed++
			r.lat = append(r.lat, lat)
			switch body[3] & 0xf {
			case dns.RcodeSuccess:
				r.noerror++
			case dns.RcodeNameError:
				r.nxdomain++
			default:
				r.other++
			}
			if judgeIt && r.firstErr == nil {
				r.firstErr = judgeWire(wire, body, c.zone, c.m)
				r.checked++
			}
		}()
	}
	wall := time.Since(start)
	if wall < c.duration {
		wall = c.duration
	}
	wg.Wait()
	return r, wall, nil
}

// judgeWire judges the reply body to the query wire (tool check's judge).
func judgeWire(wire, body []byte, zone string, m netMap) error {
	q, resp := new(dns.Msg), new(dns.Msg)
	if err := q.Unpack(wire); err != nil {
		return fmt.Errorf("unpack a query of the file: %w", err)
	}
	if err := resp.Unpack(body); err != nil {
		return fmt.Errorf("%s: unpack the reply: %w", q.Question[0].Name, err)
	}
	var c checked
	if err := judge(q, resp, zone, m, &c); err != nil {
		return fmt.Errorf("%s %v: %w", strings.TrimSpace(q.Question[0].String()), q.IsEdns0().Option, err)
	}
	return nil
}

// percentile is the p-th percentile (0..100) of d, sorted in place
// (nearest rank; 0 for none).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(p/100*float64(len(d))+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

// selfCPU is the CPU time the process has used (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// printLoad prints a run's result: a line for people and a line of
// fields for run.sh ("RESULT sent completed lost http_errors noerror
// nxdomain other avg_us p50_us p99_us qps cpu_ns checked").
func printLoad(w io.Writer, c loadConfig, r *loadResult, wall time.Duration) {
	var sum time.Duration
	for _, l := range r.lat {
		sum += l
	}
	avg := time.Duration(0)
	if len(r.lat) > 0 {
		avg = sum / time.Duration(len(r.lat))
	}
	p50, p99 := percentile(r.lat, 50), percentile(r.lat, 99)
	qps := float64(r.completed) / wall.Seconds()
	cpu := selfCPU()
	mode := fmt.Sprintf("%d HTTP/2 connection(s) kept alive, %d in flight each at most", c.conns, c.inflight)
	if c.newConn {
		mode = fmt.Sprintf("a new TLS connection per query, %d at once at most", c.conns)
	}
	fmt.Fprintf(w, "dohload %s %s at %d qps for %s (%s): %d sent, %d completed, %d lost, %d HTTP errors; NOERROR %d NXDOMAIN %d other %d; latency avg %.0f us, p50 %.0f us, p99 %.0f us; %.0f qps answered; %d replies judged right; own CPU %.2f us per query\n",
		c.method, c.url, c.qps, c.duration, mode, r.sent, r.completed, r.lost, r.httpErrors, r.noerror, r.nxdomain, r.other,
		us(avg), us(p50), us(p99), qps, r.checked, float64(cpu)/1e3/float64(max(r.sent, 1)))
	fmt.Fprintf(w, "RESULT %d %d %d %d %d %d %d %.0f %.0f %.0f %.1f %d %d\n",
		r.sent, r.completed, r.lost, r.httpErrors, r.noerror, r.nxdomain, r.other, us(avg), us(p50), us(p99), qps, cpu.Nanoseconds(), r.checked)
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
