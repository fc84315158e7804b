package server

import (
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
)

// scratch is the reused storage of one query at a time: the request
// parsed, the reply built, and the records and options around them. A
// UDP reader owns one for its life, so its queries allocate (almost)
// nothing; Respond takes a fresh one per call.
type scratch struct {
	// req is the request, when parsed by parseQuery or unpacked into.
	req dns.Msg
	// question, reqOpt, reqExtra, reqOpts and reqECS back req's
	// sections when parseQuery fills it.
	question [1]dns.Question
	reqOpt   dns.OPT
	reqExtra [1]dns.RR
	reqOpts  [2]dns.EDNS0
	reqECS   [2]dns.EDNS0_LOCAL
	// names interns the question names read (case kept), so that a name
	// asked again costs no allocation; cleared when it grows too big.
	names   map[string]internedName
	nameBuf []byte
	// qlower is the question's name lower-cased when parseQuery parsed
	// it, else "" (respond lower-cases it).
	qlower string
	// qwire is the question's name as the query has it when parseQuery
	// parsed it (packReply copies it), else nil.
	qwire []byte

	// resp is the reply; opt, optExtra, extra, subnet and ecs back its
	// OPT record, additional section and Client Subnet option.
	resp     dns.Msg
	opt      dns.OPT
	optExtra [1]dns.RR
	optOpts  [1]dns.EDNS0
	extra    []dns.RR
	subnet   dns.EDNS0_SUBNET
	ecs      ecs
	// raw lets respond leave the Client Subnet option out of resp, as
	// bytes in tail that reply appends to the packed reply.
	raw  bool
	tail []byte
	// size, r, asked, hadECS and echo are what build leaves to finish
	// (or packReply): the UDP payload the reply may fill, the
	// snapshot's response (asked: the snapshot was asked), whether req
	// had a valid Client Subnet option, and whether the reply echoes it.
	size   int
	r      gslb.Response
	asked  bool
	hadECS bool
	echo   bool

	// counters caches the metrics' counters by label values.
	counters counterCache
}

// internedName is a name read and its lower-cased form.
type internedName struct{ name, lower string }

// maxNames bounds scratch.names.
const maxNames = 4096

// resetReply clears the reply, keeping its storage.
func (sc *scratch) resetReply() {
	sc.resp = dns.Msg{}
	sc.opt = dns.OPT{}
	sc.tail = sc.tail[:0]
	sc.r, sc.asked, sc.hadECS, sc.echo = gslb.Response{}, false, false, false
}

// setEdns0 gives the reply its OPT record (what dns.Msg.SetEdns0 does,
// in sc's storage).
func (sc *scratch) setEdns0(udp uint16, do bool) {
	sc.opt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}, Option: sc.optOpts[:0]}
	sc.opt.SetUDPSize(udp)
	if do {
		sc.opt.SetDo()
	}
	sc.optExtra[0] = &sc.opt
	sc.resp.Extra = sc.optExtra[:1]
}

// counterCache holds the metrics' counters by label values, so that a
// reader counts a query without building a label slice: the label
// values of a query repeat (bounded types and rcodes, configured policies
// and pools). The last counter of each vector is kept aside, and found
// by comparing its label values (the same strings, most often: the
// snapshot's). Cleared when it grows too big (a reload's new names). The
// vectors it caches are never reset, so a cached counter stays the one
// exported.
//
// A UDP reader's cache is local: it counts in its own counters (no cache
// line shared with the other readers), which the metrics fold into the
// exported ones whenever they are collected (Metrics.fold), so a scrape
// sees every query counted before it; release folds them for good.
type counterCache struct {
	m     *Metrics
	local bool
	all   map[counterKey]*cachedCounter
	bank  *bank // the local counters, known to m
	last  [vecCount]lastCounter
	lastQ struct {
		qtype int
		rcode int
		c     *cachedCounter
	}
}

// lastCounter is the counter of label values a and b last counted.
type lastCounter struct {
	a, b string
	c    *cachedCounter
}

// cachedCounter is one exported counter, and for a local cache its count
// not yet folded into it.
type cachedCounter struct {
	ctr    prometheus.Counter
	n      atomic.Uint64
	folded uint64 // under Metrics.mu
}

// counterKey names one counter: which vector, and its two label values.
type counterKey struct {
	vec  uint8
	a, b string
}

// The vectors of counterKey.vec.
const (
	vecQueries uint8 = iota
	vecAnswers
	vecResorts
	vecEmergency
	vecECS
	vecTruncated
	vecCount
)

// inc counts one in the counter of vec with label values a (and b, when
// the vector has two labels).
func (c *counterCache) inc(m *Metrics, vec uint8, a, b string) {
	l := &c.last[vec]
	if c.m != m || l.c == nil || l.a != a || l.b != b {
		*l = lastCounter{a, b, c.counter(m, vec, a, b)}
	}
	c.add(l.c)
}

// incQuery counts one query of type qtype answered rcode.
func (c *counterCache) incQuery(m *Metrics, qtype, rcode int) {
	l := &c.lastQ
	if c.m != m || l.c == nil || l.qtype != qtype || l.rcode != rcode {
		qt := "NONE"
		if qtype != noQtype {
			qt = qtypeLabel(uint16(qtype))
		}
		e := c.counter(m, vecQueries, qt, rcodeLabel(rcode))
		l.qtype, l.rcode, l.c = qtype, rcode, e
	}
	c.add(l.c)
}

// noQtype stands for no question in incQuery.
const noQtype = -1

// add counts one in e.
func (c *counterCache) add(e *cachedCounter) {
	if c.local {
		e.n.Add(1)
		return
	}
	e.ctr.Inc()
}

// counter returns the counter of vec with label values a (and b).
func (c *counterCache) counter(m *Metrics, vec uint8, a, b string) *cachedCounter {
	if c.m != m || len(c.all) >= maxNames {
		c.reset(m)
	}
	k := counterKey{vec, a, b}
	if e, ok := c.all[k]; ok {
		return e
	}
	e := &cachedCounter{}
	switch vec {
	case vecQueries:
		e.ctr = m.queries.WithLabelValues(a, b)
	case vecAnswers:
		e.ctr = m.answers.WithLabelValues(a, b)
	case vecResorts:
		e.ctr = m.resorts.WithLabelValues(a, b)
	case vecEmergency:
		e.ctr = m.emAnswers.WithLabelValues(a)
	case vecECS:
		e.ctr = m.ecs
	default:
		e.ctr = m.truncated
	}
	c.all[k] = e
	if c.bank != nil {
		m.addCounter(c.bank, e)
	}
	return e
}

// reset empties the cache for m, folding its local counters for good.
func (c *counterCache) reset(m *Metrics) {
	c.release()
	c.m, c.all = m, make(map[counterKey]*cachedCounter)
	c.last, c.lastQ.c = [vecCount]lastCounter{}, nil
	if c.local {
		c.bank = m.addBank()
	}
}

// release folds the local counters into the exported ones for good: the
// reader is done counting.
func (c *counterCache) release() {
	if c.bank != nil {
		c.m.dropBank(c.bank)
		c.bank = nil
	}
}
