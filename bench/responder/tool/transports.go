package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// answer is what a reply says, the same over every transport: the
// response code, the set of records answered (an address, or the type
// of another record), and the ECS scope (-1: no ECS in the reply).
type answer struct {
	rcode int
	rrs   []string // sorted
	scope int
}

// String is a's text for a difference's report.
func (a answer) String() string {
	s := fmt.Sprintf("%s [%s]", dns.RcodeToString[a.rcode], strings.Join(a.rrs, " "))
	if a.scope >= 0 {
		s += fmt.Sprintf(" scope /%d", a.scope)
	}
	return s
}

// equal reports whether a and b say the same.
func (a answer) equal(b answer) bool {
	return a.rcode == b.rcode && a.scope == b.scope && slices.Equal(a.rrs, b.rrs)
}

// answerOf is the answer of a DNS reply.
func answerOf(m *dns.Msg) answer {
	a := answer{rcode: m.Rcode, scope: -1}
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			a.rrs = append(a.rrs, v.A.String())
		case *dns.AAAA:
			a.rrs = append(a.rrs, v.AAAA.String())
		default:
			a.rrs = append(a.rrs, dns.TypeToString[rr.Header().Rrtype])
		}
	}
	slices.Sort(a.rrs)
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				a.scope = int(e.SourceScope)
			}
		}
	}
	return a
}

// jsonReply is the part of the JSON API's reply (application/dns-json)
// answerOfJSON reads.
type jsonReply struct {
	Status int `json:"Status"`
	Answer []struct {
		Type uint16 `json:"type"`
		Data string `json:"data"`
	} `json:"Answer"`
	ECS string `json:"edns_client_subnet"`
}

// answerOfJSON is the answer of a JSON API reply: the records' data
// (addresses) or types, the scope of edns_client_subnet
// ("ADDRESS/SCOPE").
func answerOfJSON(body []byte) (answer, error) {
	var r jsonReply
	if err := json.Unmarshal(body, &r); err != nil {
		return answer{}, fmt.Errorf("not a JSON API reply: %w", err)
	}
	a := answer{rcode: r.Status, scope: -1}
	for _, rr := range r.Answer {
		switch rr.Type {
		case dns.TypeA, dns.TypeAAAA:
			a.rrs = append(a.rrs, strings.TrimSpace(rr.Data))
		default:
			a.rrs = append(a.rrs, dns.TypeToString[rr.Type])
		}
	}
	slices.Sort(a.rrs)
	if r.ECS != "" {
		_, s, ok := strings.Cut(r.ECS, "/")
		if _, err := fmt.Sscanf(s, "%d", &a.scope); !ok || err != nil {
			return answer{}, fmt.Errorf("edns_client_subnet %q: want ADDRESS/SCOPE", r.ECS)
		}
	}
	return a, nil
}

// jsonURL is the JSON API's URL of query q at base (…/resolve): name,
// type and, with ECS, edns_client_subnet=ADDRESS/SOURCE.
func jsonURL(base string, q *dns.Msg) string {
	v := url.Values{}
	v.Set("name", q.Question[0].Name)
	v.Set("type", dns.TypeToString[q.Question[0].Qtype])
	if opt := q.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				v.Set("edns_client_subnet", fmt.Sprintf("%s/%d", e.Address, e.SourceNetmask))
			}
		}
	}
	return base + "?" + v.Encode()
}

// transportNames are the transports compared, in order.
var transportNames = [...]string{"udp", "tcp", "dot", "doh", "json"}

// asker sends a query over each transport, on connections of its own.
type asker struct {
	udp, tcp, dot *dns.Client
	udpC, tcpC    *dns.Conn
	dotC          *dns.Conn
	udpAddr       string
	tcpAddr       string
	dotAddr       string
	http          *http.Client
	dohURL        string
	jsonURL       string
}

// ask sends q over transport t and returns the answer (and, over
// UDP, the reply, for the judge).
func (a *asker) ask(t string, q *dns.Msg) (answer, *dns.Msg, error) {
	var c *dns.Client
	var conn **dns.Conn
	var addr string
	switch t {
	case "udp":
		c, conn, addr = a.udp, &a.udpC, a.udpAddr
	case "tcp":
		c, conn, addr = a.tcp, &a.tcpC, a.tcpAddr
	case "dot":
		c, conn, addr = a.dot, &a.dotC, a.dotAddr
	case "doh":
		wire, err := q.Pack()
		if err != nil {
			return answer{}, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.dohURL, bytes.NewReader(wire))
		if err != nil {
			return answer{}, nil, err
		}
		req.Header.Set("Content-Type", "application/dns-message")
		body, err := a.get(req)
		if err != nil {
			return answer{}, nil, err
		}
		m := new(dns.Msg)
		if err := m.Unpack(body); err != nil {
			return answer{}, nil, fmt.Errorf("unpack the reply: %w", err)
		}
		return answerOf(m), m, nil
	case "json":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, jsonURL(a.jsonURL, q), nil)
		if err != nil {
			return answer{}, nil, err
		}
		body, err := a.get(req)
		if err != nil {
			return answer{}, nil, err
		}
		ans, err := answerOfJSON(body)
		return ans, nil, err
	}
	for try := 0; ; try++ {
		if *conn == nil {
			cn, err := c.Dial(addr)
			if err != nil {
				return answer{}, nil, err
			}
			*conn = cn
		}
		m, _, err := c.ExchangeWithConn(q, *conn)
		if err == nil {
			return answerOf(m), m, nil
		}
		_ = (*conn).Close()
		*conn = nil
		if try == 1 {
			return answer{}, nil, err
		}
	}
}

// get does req and returns the body of a 200 reply.
func (a *asker) get(req *http.Request) ([]byte, error) {
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if resp.ProtoMajor != 2 {
		return nil, fmt.Errorf("%s, not HTTP/2", resp.Proto)
	}
	return body, nil
}

// close closes a's connections.
func (a *asker) close() {
	for _, c := range []*dns.Conn{a.udpC, a.tcpC, a.dotC} {
		if c != nil {
			_ = c.Close()
		}
	}
	a.http.CloseIdleConnections()
}

// transports sends -n queries of the realistic mix (tool queries' mix,
// -seed) to one lbdnsd over UDP, TCP, DNS over TLS, DNS over HTTPS
// (POST, HTTP/2) and the JSON API, compares the answers (response
// code, the set of records, the ECS scope: every transport carries the
// Client Subnet, the JSON API as edns_client_subnet=) and judges the
// UDP one as tool check does. It prints the number of differences (and
// the first few) and fails on one, or on a wrong answer.
func transports(args []string) error {
	fs := flag.NewFlagSet("transports", flag.ContinueOnError)
	udpAddr := fs.String("udp", "127.0.0.1:5301", "UDP and TCP address")
	dotAddr := fs.String("dot", "", "DNS over TLS address")
	dohURL := fs.String("doh", "", "DoH URL (https://127.0.0.1:PORT/dns-query)")
	jURL := fs.String("json", "", "JSON API URL (https://127.0.0.1:PORT/resolve)")
	ca := fs.String("ca", "", "PEM file of the CA that verifies the server")
	n := fs.Int("n", 10000, "queries")
	dyn := fs.Int("dyn", 100, "dynamic names")
	static := fs.Int("static", 100, "static names")
	regions := fs.Int("regions", 8, "regions")
	prefixes := fs.Int("prefixes", 0, "the map's /24s (0: 10.R.0.0/16 per region)")
	zone := fs.String("zone", "bench.test", "zone")
	seed := fs.Uint64("seed", 5, "random seed")
	workers := fs.Int("workers", 4, "queries in flight")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dotAddr == "" || *dohURL == "" || *jURL == "" || *n < 1 || *workers < 1 {
		return errors.New("transports: -dot, -doh and -json are required; -n, -workers at least 1")
	}
	cfg, err := tlsConfig(*ca)
	if err != nil {
		return fmt.Errorf("transports: %w", err)
	}
	qs, err := mixQueries("realistic", *n, *dyn, *static, *regions, *prefixes, *seed)
	if err != nil {
		return err
	}
	m := newNetMap(*regions, *prefixes)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		diffs   []string
		ndiff   int
		wrong   error
		failed  error
		ecs, nx int
	)
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &asker{
				udp:     &dns.Client{Net: "udp", Timeout: 2 * time.Second},
				tcp:     &dns.Client{Net: "tcp", Timeout: 2 * time.Second},
				dot:     &dns.Client{Net: "tcp-tls", Timeout: 2 * time.Second, TLSConfig: cfg.Clone()},
				udpAddr: *udpAddr, tcpAddr: *udpAddr, dotAddr: *dotAddr,
				http:   &http.Client{Transport: h2Transport(cfg), Timeout: 5 * time.Second},
				dohURL: *dohURL, jsonURL: *jURL,
			}
			defer a.close()
			for i := w; i < len(qs); i += *workers {
				q := qs[i].msg(*zone)
				q.Id = uint16(i)
				var got [len(transportNames)]answer
				var udpReply *dns.Msg
				for j, t := range transportNames {
					ans, reply, err := a.ask(t, q)
					if err != nil {
						mu.Lock()
						if failed == nil {
							failed = fmt.Errorf("transports: %s %s: %w", t, strings.TrimSpace(q.Question[0].String()), err)
						}
						mu.Unlock()
						return
					}
					got[j] = ans
					if t == "udp" {
						udpReply = reply
					}
				}
				var c checked
				jerr := judge(q, udpReply, *zone, m, &c)
				mu.Lock()
				if jerr != nil && wrong == nil {
					wrong = fmt.Errorf("transports: udp %s %v: %w", strings.TrimSpace(q.Question[0].String()), q.IsEdns0().Option, jerr)
				}
				if qs[i].ecs {
					ecs++
				}
				if qs[i].kind == kindNX {
					nx++
				}
				for j := 1; j < len(got); j++ {
					if !got[j].equal(got[0]) {
						ndiff++
						if len(diffs) < 5 {
							diffs = append(diffs, fmt.Sprintf("%s: udp %v, %s %v", strings.TrimSpace(q.Question[0].String()), got[0], transportNames[j], got[j]))
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	for _, d := range diffs {
		fmt.Println("difference:", d)
	}
	fmt.Printf("%d queries of the realistic mix (%d with ECS, %d NXDOMAIN) over %s to one server: %d differences (rcode, the set of records, the ECS scope) against UDP; every UDP answer %s\n",
		*n, ecs, nx, strings.Join(transportNames[:], ", "), ndiff, map[bool]string{true: "right", false: "judged: one WRONG"}[wrong == nil])
	if wrong != nil {
		return wrong
	}
	if ndiff > 0 {
		return fmt.Errorf("transports: %d differences", ndiff)
	}
	return nil
}
