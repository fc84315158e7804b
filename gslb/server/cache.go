package server

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"net/netip"
)

// replyCache is a UDP reader's cache of the replies it built, so that a
// question asked again is answered by copying its reply, without parsing
// it or asking the snapshot. It is exact, never stale: an entry is the
// reply the reader's path would build again, byte for byte but the ID,
// and it counts the same metrics. That holds because
//
//   - the key is the whole query but its ID (flags, question as asked,
//     EDNS and its options), and the sender's address when the answer
//     depends on it (gslb.Reuse.Source);
//   - an entry is served only from the snapshot that built it (the same
//     box: every Swap, every reload, every member state change and every
//     operator switch makes a new one), to the server that built it;
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
}

// replyCacheSlots is the number of slots of a reader's reply cache.
const replyCacheSlots = 4096

// maxPeriod bounds the rotation period of an answer kept: a pool that
// turns over more positions (a long weighted schedule) is not cached.
const maxPeriod = 16

// cacheSlot is one question's replies.
type cacheSlot struct {
	box *answerer  // the snapshot they came from
	gen uint64     // the counter cache's generation they counted in
	key []byte     // the query but its ID
	src netip.Addr // the sender; invalid: any
	// missed is the hash of the last other key that missed the slot
	// while it was in use (see put).
	missed uint64
	// rotor and period are the answer's gslb.Reuse: the reader's own
	// counter it turns with (index plus one; 0: none), and how often it
	// repeats. variants holds the reply at each position (one without
	// rotor).
	rotor, period int
	variants      []cachedReply
}

// cachedReply is one reply kept: its bytes (ID zero), the counters it
// counted, and whether it is set.
type cachedReply struct {
	set      bool
	reply    []byte
	counters []*cachedCounter
}

// newReplyCache returns an empty cache.
func newReplyCache() *replyCache {
	return &replyCache{seed: maphash.MakeSeed(), slots: make([]cacheSlot, replyCacheSlots)}
}

// find returns the slots where query (whole, at least a header) from
// src may be kept: one for a reply that holds for any sender, one for a
// reply to src alone.
// The keys' hashes are returned too.
func (c *replyCache) find(query []byte, src netip.Addr) (anySrc, fromSrc *cacheSlot, h, hs uint64) {
	h = maphash.Bytes(c.seed, query[2:])
	a := src.As16()
	hs = mix(h ^ binary.LittleEndian.Uint64(a[:8]) ^ mix(binary.LittleEndian.Uint64(a[8:])))
	n := uint64(len(c.slots))
	return &c.slots[h%n], &c.slots[hs%n], h, hs
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// holds reports whether sl keeps replies to query from src (an invalid
// src: from any sender) built by box, counting in sc's counters.
func (sl *cacheSlot) holds(sc *scratch, box *answerer, query []byte, src netip.Addr) bool {
	return sl.box == box && sl.gen == sc.counters.gen && sl.src == src && bytes.Equal(sl.key, query[2:])
}

// variant returns the reply sl keeps for the reader's rotation counters
// now (sc.rot), or nil.
func (sl *cacheSlot) variant(sc *scratch) *cachedReply {
	v := 0
	if sl.rotor > 0 {
		if sl.rotor > len(sc.rot) {
			return nil
		}
		v = int(sc.rot[sl.rotor-1] % uint64(sl.period))
	}
	if v < len(sl.variants) && sl.variants[v].set {
		return &sl.variants[v]
	}
	return nil
}

// get answers query from src out of the cache into dst, if it holds its
// reply: the reply with the query's ID, its counters counted and the
// rotation counter moved on.
func (c *replyCache) get(sc *scratch, box *answerer, dst, query []byte, src netip.Addr) ([]byte, bool) {
	anySrc, fromSrc, _, _ := c.find(query, src)
	sl := anySrc
	if !sl.holds(sc, box, query, netip.Addr{}) {
		if sl = fromSrc; !sl.holds(sc, box, query, src) {
			return nil, false
		}
	}
	r := sl.variant(sc)
	if r == nil {
		return nil, false
	}
	out := append(dst[:0], r.reply...)
	out[0], out[1] = query[0], query[1]
	if sl.rotor > 0 {
		sc.rot[sl.rotor-1]++
	}
	for _, e := range r.counters {
		sc.counters.add(e)
	}
	return out, true
}

// put keeps reply, just built for query from src by box, with the
// counters it counted (sc.counters' record), when the snapshot's
// response (sc.r) says it comes again.
func (c *replyCache) put(sc *scratch, box *answerer, query, reply []byte, src netip.Addr) {
	reuse := sc.r.Reuse
	if !sc.asked || !reuse.OK || len(reply) < 12 {
		return
	}
	v := 0
	if reuse.Rotor > 0 {
		if reuse.Period < 1 || reuse.Period > maxPeriod || reuse.Rotor > len(sc.rot) {
			return
		}
		// The answer took the position just before the counter's.
		v = int((sc.rot[reuse.Rotor-1] - 1) % uint64(reuse.Period))
	}
	anySrc, sl, h, hs := c.find(query, src)
	if !reuse.Source {
		sl, src, hs = anySrc, netip.Addr{}, h
	}
	if !sl.holds(sc, box, query, src) || sl.rotor != reuse.Rotor || sl.period != reuse.Period {
		// Another question, snapshot or sender. A slot in use is
		// taken over by a key that missed it last too.
		if sl.box == box && sl.gen == sc.counters.gen && sl.missed != hs {
			sl.missed = hs
			return
		}
		sl.box, sl.gen, sl.src = box, sc.counters.gen, src
		sl.key = append(sl.key[:0], query[2:]...)
		sl.rotor, sl.period = reuse.Rotor, reuse.Period
		n := max(1, reuse.Period)
		if cap(sl.variants) < n {
			sl.variants = make([]cachedReply, n)
		}
		sl.variants = sl.variants[:n]
		for i := range sl.variants {
			sl.variants[i].set = false
		}
	}
	r := &sl.variants[v]
	r.set = true
	r.reply = append(r.reply[:0], reply...)
	r.reply[0], r.reply[1] = 0, 0
	r.counters = append(r.counters[:0], sc.counters.rec...)
}
