package responder

import (
	"sync/atomic"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
)

// scratch is the reused storage of one query at a time: the request
// parsed, the reply built, and the records and options around them. A
// UDP reader owns one for its life, so its queries allocate (almost)
// nothing; Respond takes a fresh one per call.
type scratch struct {
	// reader is set for a UDP reader's scratch: rot are its own
	// rotation counters (gslb.Query.Rotation), kept across queries.
	reader bool
	rot    []uint64
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
	// nw writes the reply's names for packReply.
	nw nameWriter
	// box is the snapshot reply answers the query from (loaded once:
	// parseName looks the name up in it, answer answers from it); nil
	// outside reply. entry is the question name's entry in it, when
	// parseName found one.
	box   *answerer
	entry gslb.Entry

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
	// ede is the reply's Extended DNS Error option as bytes (empty:
	// none; only with EDNS), edeCode and edeText what it says.
	ede     []byte
	edeCode uint16
	edeText string
	// size, r, asked, hadECS and echo are what build leaves to finish
	// (or packReply): the UDP payload the reply may fill, the
	// snapshot's response (asked: the snapshot was asked), whether req
	// had a valid Client Subnet option, and whether the reply echoes it.
	size   int
	r      gslb.Response
	asked  bool
	hadECS bool
	echo   bool
	// recs holds the records of the snapshot's answer (gslb.Query.Records):
	// good until the next query.
	recs gslb.Records

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
	sc.tail, sc.ede = sc.tail[:0], sc.ede[:0]
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
	// hot and hotQ are direct-mapped caches in front of all: a counter
	// is found there by the identity of its label values (the same
	// bytes: a snapshot's policy, pool and name strings, the constant
	// labels) or its query type and rcode, without hashing strings.
	hot  [hotSize]hotCounter
	hotQ [hotSize]hotQuery
}

// hotSize is the number of entries of each direct-mapped counter cache.
const hotSize = 64

// hotCounter is an entry of counterCache.hot: the counter of vec with
// label values a and b.
type hotCounter struct {
	vec  uint8
	a, b string
	c    *cachedCounter
}

// hotQuery is an entry of counterCache.hotQ: the counter of queries of
// qtype answered rcode.
type hotQuery struct {
	qtype, rcode int
	c            *cachedCounter
}

// same reports whether a and b are the same bytes (so equal strings).
func same(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

// hotIndex is the slot of hot for vec with label values a and b.
func hotIndex(vec uint8, a, b string) int {
	h := uint64(uintptr(unsafe.Pointer(unsafe.StringData(a))))*0x9e3779b97f4a7c15 ^
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(b))))*0xbf58476d1ce4e5b9 ^ uint64(vec)
	return int((h ^ h>>29) % hotSize)
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
	h := &c.hot[hotIndex(vec, a, b)]
	if c.m != m || h.c == nil || h.vec != vec || !same(h.a, a) || !same(h.b, b) {
		e := c.counter(m, vec, a, b)
		*h = hotCounter{vec, a, b, e}
	}
	c.add(h.c)
}

// incQuery counts one query of type qtype answered rcode.
func (c *counterCache) incQuery(m *Metrics, qtype, rcode int) {
	i := uint(qtype*31+rcode) % hotSize
	l := &c.hotQ[i]
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
	c.hot, c.hotQ = [hotSize]hotCounter{}, [hotSize]hotQuery{}
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
