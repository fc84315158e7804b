package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// check asks a server of the layout config writes a sample of its
// dynamic names (A and AAAA, with an ECS /24 of a random region's
// network, or without ECS) and fails on the first answer that is not
// the members of the pool the client's location gives (every member
// up: region R's pool, or the global pool without ECS).
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	server := fs.String("server", "127.0.0.1:5301", "the server")
	n := fs.Int("n", 200, "queries")
	names := fs.Int("names", 100, "dynamic names dyn0..dynN-1")
	regions := fs.Int("regions", 8, "regions")
	prefixes := fs.Int("prefixes", 0, "the map's /24s (0: 10.R.0.0/16 per region)")
	seed := fs.Uint64("seed", 3, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *names < 1 || *regions < 1 || *regions > 200 {
		return errors.New("check: -n, -names at least 1, -regions 1..200")
	}
	rng := rand.New(rand.NewPCG(*seed, 17))
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for i := range *n {
		q := new(dns.Msg)
		t := []uint16{dns.TypeA, dns.TypeAAAA}[rng.IntN(2)]
		q.SetQuestion(fmt.Sprintf("dyn%d.bench.test.", rng.IntN(*names)), t)
		q.RecursionDesired = false
		q.SetEdns0(1232, false)
		a, b, c6 := 11, 0, "11:0"
		if rng.IntN(4) > 0 {
			r := rng.IntN(*regions)
			var addr net.IP
			if *prefixes > 0 {
				k := r + *regions*rng.IntN(max(1, *prefixes / *regions))
				p := 0x01000000 + k<<8
				addr = net.IPv4(byte(p>>24), byte(p>>16), byte(p>>8), 0).To4()
			} else {
				addr = net.IPv4(10, byte(r), byte(rng.IntN(256)), 0).To4()
			}
			opt := q.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: addr})
			a, b, c6 = 10, r, fmt.Sprintf("10:%d", r)
		}
		want := []string{fmt.Sprintf("127.%d.%d.1", a, b), fmt.Sprintf("127.%d.%d.2", a, b)}
		if t == dns.TypeAAAA {
			want = []string{"fd00::" + c6 + ":1", "fd00::" + c6 + ":2"}
		}
		resp, _, err := c.Exchange(q, *server)
		if err != nil {
			return fmt.Errorf("check: query %d %s: %w", i, q.Question[0].String(), err)
		}
		var got []string
		for _, rr := range resp.Answer {
			switch v := rr.(type) {
			case *dns.A:
				got = append(got, v.A.String())
			case *dns.AAAA:
				got = append(got, v.AAAA.String())
			}
		}
		slices.Sort(got)
		if resp.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
			return fmt.Errorf("check: query %d %s %v: answer %s %s, want %s", i, q.Question[0].String(), q.IsEdns0().Option,
				dns.RcodeToString[resp.Rcode], strings.Join(got, " "), strings.Join(want, " "))
		}
	}
	fmt.Printf("%d answers checked: every one the members of the client's pool\n", *n)
	return nil
}
