package responder

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/gslb"
)

// algorithmsDoc is packDoc with a name per pool algorithm (rr, wrr, hash by
// source and by ECS, rendezvous, priority, random) and a name whose
// pool is down (its last resort answers).
func algorithmsDoc() string {
	var b strings.Builder
	b.WriteString(packDoc())
	for i, alg := range []string{"rr", "wrr", "hash", "rendezvous", "priority", "random", "all"} {
		fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [\"t\"]\nalgorithm = %q\n", alg, alg)
		for j := range 3 {
			fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"127.20.%d.%d\"\nweight = %d\npriority = %d\n", j, i, j+1, j+1, j/2)
		}
		fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"v6\"\naddress = \"fd00::20:%d\"\n", i)
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"%s.bench.test\"\n[[gslb.name.policy]]\nmatch = { region = \"r1\" }\npool = \"gl\"\n[[gslb.name.policy]]\npool = %q\n", alg, alg)
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"%s-ecs.bench.test\"\necs = true\n[[gslb.name.policy]]\npool = %q\n", alg, alg)
	}
	b.WriteString(`
[[gslb.pool]]
name = "down"
monitors = ["t"]
[[gslb.pool.member]]
name = "d"
address = "127.30.0.1"

[[gslb.name]]
name = "down.bench.test"
[[gslb.name.policy]]
pool = "down"
`)
	return b.String()
}

// randomECS is the data of a Client Subnet option: IPv4 from 10.0.0.0/13
// (inside and around the topology's networks) of SOURCE 16 to 32, the
// same IPv4-mapped (FAMILY 2, SOURCE 112 to 128), or IPv6 of SOURCE 48
// to 64; one in 20 with a bit set beyond SOURCE.
func randomECS(rng *rand.Rand) []byte {
	family, source := 1, 16+rng.IntN(17)
	addr := []byte{10, byte(rng.IntN(8)), byte(rng.Uint32()), byte(rng.Uint32())}
	switch rng.IntN(6) {
	case 0, 1:
		family, source = 2, 48+rng.IntN(17)
		addr = []byte{0x20, 1, 0xd, 0xb8, 0, byte(rng.IntN(2)), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0, 0, 0, 0, 0, 0, 0}
	case 2:
		family, source = 2, source+96
		addr = append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, addr...)
	}
	p := netip.PrefixFrom(netip.AddrFrom16([16]byte(append(addr, make([]byte, 16)...)[:16])), source)
	if family == 1 {
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte(addr)), source)
	}
	raw := p.Masked().Addr().AsSlice()[:(source+7)/8]
	if rng.IntN(20) == 0 && source%8 != 0 {
		raw[len(raw)-1] |= 1 // beyond SOURCE: FORMERR
	}
	return append([]byte{0, byte(family), byte(source), 0}, raw...)
}

// serviceDoc is algorithmsDoc with more names of each kind: a name with a
// static last resort, one that answers SERVFAIL, and a twin of every
// name (the same keys and policies under another name), so that, once
// asServices has turned it, several names share one service.
func serviceDoc() string {
	doc := algorithmsDoc() + `
[[gslb.name]]
name = "st.bench.test"
ttl = 7
last_resort = "static"
static = ["192.0.2.7", "2001:db8::7", "192.0.2.8"]
[[gslb.name.policy]]
match = { region = "r0" }
pool = "down"

[[gslb.name]]
name = "sf.bench.test"
ecs = true
last_resort = "servfail"
[[gslb.name.policy]]
match = { region = "r1" }
pool = "down"
`
	var twins strings.Builder
	for _, b := range nameBlocks(doc) {
		twins.WriteString("\n" + strings.Replace(b.text, `name = "`, `name = "twin-`, 1))
	}
	return doc + twins.String()
}

// nameBlock is one [[gslb.name]] of a document, with its policies: its
// text, and the lines of its keys (but name and ttl) and policies.
type nameBlock struct {
	text       string
	name, ttl  string // their lines
	keys, pols []string
}

// nameBlocks finds the [[gslb.name]] blocks of doc (each up to the next
// header other than [[gslb.name.policy]]), in order.
func nameBlocks(doc string) []nameBlock {
	var out []nameBlock
	var cur *nameBlock
	inPolicy := false
	for line := range strings.Lines(doc) {
		t := strings.TrimSpace(line)
		switch {
		case t == "[[gslb.name]]":
			out = append(out, nameBlock{})
			cur, inPolicy = &out[len(out)-1], false
		case t == "[[gslb.name.policy]]" && cur != nil:
			inPolicy = true
			cur.pols = append(cur.pols, line)
			cur.text += line
			continue
		case strings.HasPrefix(t, "["):
			cur = nil
		}
		if cur == nil {
			continue
		}
		cur.text += line
		switch {
		case t == "[[gslb.name]]" || t == "":
		case inPolicy:
			cur.pols = append(cur.pols, line)
		case strings.HasPrefix(t, "name "):
			cur.name = line
		case strings.HasPrefix(t, "ttl "):
			cur.ttl = line
		default:
			cur.keys = append(cur.keys, line)
		}
	}
	return out
}

// asServices turns every [[gslb.name]] of doc into a name with a
// service: names whose keys and policies are the same share one; the
// ttl of every other service's first name goes to the service (its
// names inherit it), the others keep theirs on the name.
func asServices(doc string) string {
	blocks := nameBlocks(doc)
	var svcs strings.Builder
	ids := map[string]int{}
	for _, b := range blocks {
		doc = strings.Replace(doc, b.text, "", 1)
	}
	var names strings.Builder
	for _, b := range blocks {
		key := strings.Join(b.keys, "") + "|" + strings.Join(b.pols, "")
		id, ok := ids[key]
		ttl := b.ttl
		if !ok {
			id = len(ids)
			ids[key] = id
			fmt.Fprintf(&svcs, "\n[[gslb.service]]\nname = \"s%d\"\n", id)
			if id%2 == 0 && ttl != "" {
				svcs.WriteString(ttl)
				ttl = ""
			}
			svcs.WriteString(strings.Join(b.keys, ""))
			svcs.WriteString(strings.ReplaceAll(strings.Join(b.pols, ""), "[[gslb.name.policy]]", "[[gslb.service.policy]]"))
		} else if id%2 == 0 {
			ttl = "" // the service's, the same
		}
		fmt.Fprintf(&names, "\n[[gslb.name]]\n%sservice = \"s%d\"\n%s", b.name, id, ttl)
	}
	return doc + svcs.String() + names.String()
}

// TestServiceAnswersAsInline: a name with a service answers every query
// with the bytes, the counters and the rotation of the same name with
// the service's keys and policies written under it, over random names,
// types, case, sources and ECS prefixes, across three snapshots with
// different members down (names of the random algorithm left out).
func TestServiceAnswersAsInline(t *testing.T) {
	inline := serviceDoc()
	shared := asServices(inline)
	var cfgs [2]*configs.Config
	for k, doc := range []string{inline, shared} {
		cfg, err := configs.Parse([]byte(doc), fmt.Sprintf("doc%d.toml", k))
		if err != nil {
			t.Fatalf("doc %d: %v\n%s", k, err, doc)
		}
		cfgs[k] = cfg
	}
	if len(cfgs[1].GSLB.Services) == 0 || len(cfgs[1].GSLB.Services) >= len(cfgs[1].GSLB.Names) ||
		len(cfgs[0].GSLB.Names) != len(cfgs[1].GSLB.Names) {
		t.Fatalf("%d services for %d names (inline %d): want names sharing services", len(cfgs[1].GSLB.Services), len(cfgs[1].GSLB.Names), len(cfgs[0].GSLB.Names))
	}
	for i, n := range cfgs[1].GSLB.Names {
		if n.Service == "" || n.Policies != nil || n.FQDN != cfgs[0].GSLB.Names[i].FQDN {
			t.Fatalf("name %d = %+v", i, n)
		}
	}
	var snaps [2][]*gslb.Snapshot
	for k, cfg := range cfgs {
		snaps[k] = []*gslb.Snapshot{snapshotOf(t, cfg, "down"), snapshotOf(t, cfg, "down", "rr/m1", "all/m0", "r0"),
			snapshotOf(t, cfg, "down", "gl", "hash/m2", "wrr/m0", "priority/m0")}
	}
	var srvs [2]*Server
	var scs [2]*scratch
	for k := range srvs {
		srvs[k] = &Server{}
		scs[k] = &scratch{reader: true, counters: counterCache{local: true}}
	}
	rng := rand.New(rand.NewPCG(19, 2026))
	sources := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.0.9.9"), netip.MustParseAddr("fd00::53")}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeTXT}
	var names []configs.GSLBName
	for _, nm := range cfgs[0].GSLB.Names {
		if !strings.Contains(nm.FQDN, "random") { // drawn at random: no two runs agree
			names = append(names, nm)
		}
	}
	const n = 9000
	bufs := [2][]byte{make([]byte, dns.MaxMsgSize), make([]byte, dns.MaxMsgSize)}
	for i := range n {
		if i%(n/3) == 0 {
			for k, s := range srvs {
				s.Swap(snaps[k][i/(n/3)])
			}
		}
		name := names[rng.IntN(len(names))].FQDN
		if rng.IntN(4) == 0 {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		m := query(name, types[rng.IntN(len(types))], []uint16{0, 512, 1232}[rng.IntN(3)])
		m.Id = uint16(i)
		if rng.IntN(3) > 0 {
			withECS(m, randomECS(rng))
		}
		w, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		src := sources[rng.IntN(len(sources))]
		var outs [2][]byte
		for k := range srvs {
			outs[k] = bytes.Clone(srvs[k].reply(scs[k], bufs[k], bytes.Clone(w), src, rng.IntN(8) == 0))
		}
		if !bytes.Equal(outs[0], outs[1]) {
			var a, b dns.Msg
			_, _ = a.Unpack(outs[0]), b.Unpack(outs[1])
			t.Fatalf("query %d %v %v from %s: with the service\n%v\ninline\n%v", i, m.Question, m.IsEdns0(), src, &b, &a)
		}
	}
	if fmt.Sprint(scs[0].rot) != fmt.Sprint(scs[1].rot) {
		t.Errorf("rotation counters %v with services, %v inline", scs[1].rot, scs[0].rot)
	}
}
