package server

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"
	"weak"

	"github.com/miekg/dns"

	"lbdns/internal/dnswire"
	"lbdns/internal/splitmix"
)

// replyCache is a UDP reader's cache of the replies it built, so that a
// question asked again is answered by copying its reply, without parsing
// it or asking the snapshot. It is exact, never stale: an entry is the
// reply the reader's path would build again, byte for byte but the ID
// (and the echoed Client Subnet address), and it counts the same
// metrics. That holds because
//
//   - the key is the whole query but its ID (flags, question as asked,
//     EDNS and its options), and the sender's address when the answer
//     depends on it (gslb.Reuse.Source);
//   - a query with a Client Subnet option matches on its ADDRESS masked
//     to the reply's SCOPE PREFIX-LENGTH only: the answer holds for every
//     client of that prefix (RFC 7871 section 7.2.1; the scope of a
//     hashed answer is the whole source prefix), and the reply echoes
//     the query's own ADDRESS, copied in;
//   - an entry is served only from the snapshot that built it (the same
//     box: every Swap, every reload, every member state change and every
//     operator switch makes a new one), to the server that built it; it
//     holds the box by a weak pointer, so a snapshot swapped out is freed
//     whatever the cache still keeps;
//   - only answers the snapshot says come again are kept
//     (gslb.Response.Reuse): never a random pick, an emergency set or a
//     last resort, which turn with counters shared by every reader;
//   - an answer that turns with the reader's own rotation counter is
//     kept per position of that counter (modulo its period): the entry
//     for the counter's position now is served, and the counter moved on
//     by one, as the snapshot would have;
//   - the metrics' counters the reply counted are kept with it and
//     counted again; an entry is dropped once those counters are (the
//     counter cache's generation).
//
// It is direct-mapped: each key has one slot. A new key takes over a
// slot in use only when it missed it twice in a row (the slot's last
// miss is remembered), so a question asked once (a random name, an ECS
// prefix seen once) does not push out one asked again and again. Its
// memory is bounded (replyCacheSlots entries of a few hundred bytes,
// each buffer reused), a flood of distinct names only churns the
// remembered misses, and a slot costs no allocation once its buffers
// are big enough.
type replyCache struct {
	seed  maphash.Seed
	slots []cacheSlot
	// scopes holds, by the hash of a query with a Client Subnet option
	// (its ADDRESS left out), the SCOPE PREFIX-LENGTH of the last reply
	// kept for it, plus one (0: none): what to mask the next one's
	// ADDRESS to before looking it up. A wrong one only misses.
	scopes []uint8
}

// replyCacheSlots is the number of slots of the reply cache of each of
// readers readers of a socket: 16,384 for up to 4 readers, fewer for
// more (65,536 in all, at least 2,048 each), so that a socket's caches
// hold at most about 65,536 replies (some 20 MB) however many CPUs read
// it. Over the benchmark's queries (bench/responder) 4,096 slots served
// 79 % of them, 16,384 slots 90 % (nearly all but the random names).
func replyCacheSlots(readers int) int {
	return max(2048, min(16384, 65536/max(1, readers)))
}

// maxPeriod bounds the rotation period of an answer kept: a pool that
// turns over more positions (a long weighted schedule) is not cached.
const maxPeriod = 16

// maxCounters bounds the metrics' counters a kept reply counts (a
// reply counts at most 4 today: queries, ECS, truncated, answers).
const maxCounters = 6

// cacheSlot is one question's replies. What a hit reads is laid out to
// touch few cache lines: the slot's first fields, then one block (data)
// with the key and the replies side by side.
type cacheSlot struct {
	box weak.Pointer[answerer] // the snapshot they came from (its id)
	gen uint64                 // the counter cache's generation they counted in
	src netip.Addr             // the sender; invalid: any
	// data holds the key (klen octets: the query but its ID, the ECS
	// ADDRESS zeroed), then the reply at each position of the rotation
	// (period of them; one without rotor), stride octets apart: its
	// length (2 octets), then its bytes (ID zero). Bit v of set says
	// the reply at position v is kept.
	data         []byte
	klen, stride int
	set          uint32
	// rotor and period are the answer's gslb.Reuse: the reader's own
	// counter it turns with (index plus one; 0: none), and how often it
	// repeats.
	rotor, period int
	// ctrs are the counters every reply of the slot counts.
	nctr int
	ctrs [maxCounters]*cachedCounter
	// scope and prefix are, for a query with ECS, the reply's scope
	// (at most the source prefix length) and the ADDRESS masked to it.
	scope  int
	prefix [16]byte
	// missed is the hash of the last other key that missed the slot
	// while it was in use (see put).
	missed uint64
}

// newReplyCache returns an empty cache of n slots.
func newReplyCache(n int) *replyCache {
	return &replyCache{seed: maphash.MakeSeed(), slots: make([]cacheSlot, n), scopes: make([]uint8, n)}
}

// cacheQuery is a query as the cache sees it: the query, where the
// ADDRESS of its Client Subnet option is (addr, n octets; n is 0 and
// addr -1 without one) and its SOURCE PREFIX-LENGTH.
type cacheQuery struct {
	b       []byte
	addr, n int
	source  int
	// hash is the hash of the query but its ID and ADDRESS (set by
	// replyCache.query).
	hash uint64
	// scope and prefix are, with ECS, the scope last kept for the query
	// and its ADDRESS masked to it (set by replyCache.find).
	scope  int
	prefix [16]byte
}

// newCacheQuery finds the Client Subnet option of query (at least a
// header). ok is false when the query cannot come from the cache: it
// has two ECS options, or one parseECS rejects (the server answers
// FORMERR). An option not found because the query is not of the common
// shape (one question, an OPT record last) leaves it in the key.
func newCacheQuery(query []byte) (q cacheQuery, ok bool) {
	q = cacheQuery{b: query, addr: -1}
	be := binary.BigEndian
	if be.Uint16(query[10:]) == 0 {
		return q, true
	}
	if be.Uint16(query[4:]) != 1 || be.Uint16(query[6:]) != 0 || be.Uint16(query[8:]) != 0 || be.Uint16(query[10:]) != 1 {
		return q, true // no OPT record where one looks: the key is all of it
	}
	off, named := dnswire.SkipName(query, 12)
	if !named || off+4+11 > len(query) {
		return q, true
	}
	off += 4
	if query[off] != 0 || be.Uint16(query[off+1:]) != dns.TypeOPT || off+11+int(be.Uint16(query[off+9:])) != len(query) {
		return q, true
	}
	for o := off + 11; o+4 <= len(query); {
		code, n := be.Uint16(query[o:]), int(be.Uint16(query[o+2:]))
		if o+4+n > len(query) {
			return q, true
		}
		if code == dns.EDNS0SUBNET {
			if _, valid := parseECS(query[o+4 : o+4+n]); !valid || q.addr >= 0 {
				return q, false // FORMERR: the server's own check, or two options
			}
			q.addr, q.n, q.source = o+8, n-4, int(query[o+6])
		}
		o += 4 + n
	}
	return q, true
}

// masked is the query's ADDRESS masked to bits.
func (q *cacheQuery) masked(bits int) (p [16]byte) {
	copy(p[:], q.b[q.addr:q.addr+q.n])
	for i := range p {
		switch {
		case bits >= 8*(i+1):
		case bits <= 8*i:
			p[i] = 0
		default:
			p[i] &= ^byte(0xff >> (bits - 8*i))
		}
	}
	return p
}

// query returns query as the cache sees it (newCacheQuery), with its
// hash.
func (c *replyCache) query(query []byte) (cacheQuery, bool) {
	q, ok := newCacheQuery(query)
	if !ok {
		return q, false
	}
	if q.addr < 0 {
		q.hash = maphash.Bytes(c.seed, q.b[2:])
		return q, true
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.Write(q.b[2:q.addr])
	_, _ = h.Write(q.b[q.addr+q.n:])
	q.hash = h.Sum64()
	return q, true
}

// find returns the slots where q from src may be kept: one for a reply
// that holds for any sender, one for a reply to src alone, with the
// keys' hashes; ok is false for a query with ECS whose scope is not
// known yet (nothing is kept for it). For a query with ECS it sets
// q.scope and q.prefix.
func (c *replyCache) find(q *cacheQuery, src netip.Addr) (anySrc, fromSrc *cacheSlot, h, hs uint64, ok bool) {
	n := uint64(len(c.slots))
	h = q.hash
	if q.addr >= 0 {
		s := c.scopes[h%n]
		if s == 0 {
			return nil, nil, 0, 0, false
		}
		q.scope = int(s) - 1
		q.prefix = q.masked(q.scope)
		h = splitmix.Mix(h ^ splitmix.Mix(binary.LittleEndian.Uint64(q.prefix[:8])^uint64(q.scope)) ^ binary.LittleEndian.Uint64(q.prefix[8:]))
	}
	a := src.As16()
	hs = splitmix.Mix(h ^ binary.LittleEndian.Uint64(a[:8]) ^ splitmix.Mix(binary.LittleEndian.Uint64(a[8:])))
	return &c.slots[h%n], &c.slots[hs%n], h, hs, true
}

// holds reports whether sl keeps replies to q from src (an invalid src:
// from any sender) built by box, counting in sc's counters, for a
// query with ECS under q's scope.
func (sl *cacheSlot) holds(sc *scratch, box *answerer, q *cacheQuery, src netip.Addr) bool {
	if sl.box != box.id || sl.gen != sc.counters.gen || sl.src != src || sl.klen != len(q.b)-2 {
		return false
	}
	key := sl.data[:sl.klen]
	if q.addr < 0 {
		return bytes.Equal(key, q.b[2:])
	}
	a := q.addr - 2
	return sl.scope == q.scope && sl.prefix == q.prefix && bytes.Equal(key[:a], q.b[2:q.addr]) && bytes.Equal(key[a+q.n:], q.b[q.addr+q.n:])
}

// variant returns the reply sl keeps for the reader's rotation counters
// now (sc.rot), or nil.
func (sl *cacheSlot) variant(sc *scratch) []byte {
	v := 0
	if sl.rotor > 0 {
		if sl.rotor > len(sc.rot) {
			return nil
		}
		v = int(sc.rot[sl.rotor-1] % uint64(sl.period))
	}
	if sl.set&(1<<v) == 0 {
		return nil
	}
	o := sl.klen + v*sl.stride
	n := int(binary.BigEndian.Uint16(sl.data[o:]))
	return sl.data[o+2 : o+2+n]
}

// get answers q from src out of the cache into dst, if it holds its
// reply: the reply with the query's ID (and ECS ADDRESS), its counters
// counted and the rotation counter moved on.
func (c *replyCache) get(sc *scratch, box *answerer, dst []byte, q *cacheQuery, src netip.Addr) ([]byte, bool) {
	anySrc, fromSrc, _, _, ok := c.find(q, src)
	if !ok {
		return nil, false
	}
	sl := anySrc
	if !sl.holds(sc, box, q, netip.Addr{}) {
		if sl = fromSrc; !sl.holds(sc, box, q, src) {
			return nil, false
		}
	}
	r := sl.variant(sc)
	if r == nil {
		return nil, false
	}
	out := append(dst[:0], r...)
	out[0], out[1] = q.b[0], q.b[1]
	if q.n > 0 {
		copy(out[len(out)-q.n:], q.b[q.addr:q.addr+q.n])
	}
	if sl.rotor > 0 {
		sc.rot[sl.rotor-1]++
	}
	for _, e := range sl.ctrs[:sl.nctr] {
		sc.counters.add(e)
	}
	return out, true
}

// put keeps reply, just built for q from src by box, with the counters
// it counted (sc.counters' record), when the snapshot's response (sc.r)
// says it comes again.
func (c *replyCache) put(sc *scratch, box *answerer, q *cacheQuery, reply []byte, src netip.Addr) {
	reuse := sc.r.Reuse
	if !sc.asked || !reuse.OK || len(reply) < 12 {
		return
	}
	query := q.b
	v := 0
	if reuse.Rotor > 0 {
		if reuse.Period < 1 || reuse.Period > maxPeriod || reuse.Rotor > len(sc.rot) {
			return
		}
		// The answer took the position just before the counter's.
		v = int((sc.rot[reuse.Rotor-1] - 1) % uint64(reuse.Period))
	}
	if q.addr >= 0 {
		// The reply echoes the option last: its SCOPE, then the
		// query's ADDRESS.
		o := len(reply) - q.n - 8 // the option's code
		if !sc.echo || o < 12 || !bytes.Equal(reply[o:o+2], []byte{0, 8}) || int(binary.BigEndian.Uint16(reply[o+2:])) != q.n+4 ||
			!bytes.Equal(reply[o+4:o+7], query[q.addr-4:q.addr-1]) || !bytes.Equal(reply[o+8:], query[q.addr:q.addr+q.n]) {
			return
		}
		scope := min(int(reply[len(reply)-q.n-1]), q.source)
		c.scopes[q.hash%uint64(len(c.scopes))] = uint8(scope + 1)
	}
	rec := sc.counters.rec
	if len(rec) > maxCounters || len(reply) > 0xffff {
		return
	}
	anySrc, sl, h, hs, _ := c.find(q, src) // the scope is known: just set
	if !reuse.Source {
		sl, src, hs = anySrc, netip.Addr{}, h
	}
	if !sl.holds(sc, box, q, src) || sl.rotor != reuse.Rotor || sl.period != reuse.Period ||
		!slices.Equal(sl.ctrs[:sl.nctr], rec) || len(reply)+2 > sl.stride {
		// Another question, snapshot or sender (or, rarely, a reply
		// of another length or with other counters). A slot in use is
		// taken over by a key that missed it last too.
		if sl.box == box.id && sl.gen == sc.counters.gen && sl.missed != hs {
			sl.missed = hs
			return
		}
		sl.box, sl.gen, sl.src = box.id, sc.counters.gen, src
		sl.rotor, sl.period = reuse.Rotor, reuse.Period
		sl.klen, sl.stride = len(query)-2, len(reply)+2
		need := sl.klen + max(1, reuse.Period)*sl.stride
		if cap(sl.data) < need {
			sl.data = make([]byte, need)
		}
		sl.data = sl.data[:need]
		copy(sl.data, query[2:])
		sl.scope, sl.prefix = q.scope, q.prefix
		if q.addr >= 0 {
			clear(sl.data[q.addr-2 : q.addr-2+q.n])
		}
		sl.set = 0
		sl.nctr = copy(sl.ctrs[:], rec)
	}
	o := sl.klen + v*sl.stride
	binary.BigEndian.PutUint16(sl.data[o:], uint16(len(reply)))
	r := sl.data[o+2 : o+2+len(reply)]
	copy(r, reply)
	r[0], r[1] = 0, 0
	sl.set |= 1 << v
}
