package flood

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Epoch is the time one summary of each kind covers.
const Epoch = time.Second

// Defaults of a Tracker.
const (
	DefaultCounters    = 512
	DefaultShortWindow = 10 * time.Second
	DefaultLongWindow  = 60 * time.Second
	DefaultFull        = 20000
)

// TrackerConfig sizes a Tracker.
type TrackerConfig struct {
	// Counters is m, the counters of each summary. Default
	// DefaultCounters; at most MaxCounters.
	Counters int
	// Short is the short window, a whole number of epochs: that many
	// epochs' summaries are kept apart. Default DefaultShortWindow.
	Short time.Duration
	// Long is the long window, a whole number of short windows: older
	// epochs are folded into one summary per short window (a slab),
	// kept until they are older than Long. Default DefaultLongWindow.
	Long time.Duration
	// Zones are the zones of Suffixer.
	Zones []string
	// Full is how many queries a second are counted one by one into the
	// summaries; beyond, each query is counted with probability 1/k and
	// weight k (k a power of two, from the last epoch's rate and
	// doubled within an epoch that passes k times Full), so that the
	// summaries' cost stays near Full updates a second at any rate.
	// The totals and the reply codes still count every query. 0:
	// DefaultFull; negative: every query is counted.
	Full int
}

func (c TrackerConfig) withDefaults() TrackerConfig {
	if c.Counters <= 0 {
		c.Counters = DefaultCounters
	}
	if c.Short < Epoch {
		c.Short = DefaultShortWindow
	}
	c.Short = c.Short.Truncate(Epoch)
	if c.Long < c.Short {
		c.Long = max(DefaultLongWindow, c.Short)
	}
	c.Long = c.Long.Truncate(c.Short)
	if c.Full == 0 {
		c.Full = DefaultFull
	}
	return c
}

// Summaries is how many summaries of each kind a Tracker of c keeps at
// most: the epoch being counted, the short window's epochs, and the
// long window's slabs (one more while the oldest ages out).
func (c TrackerConfig) Summaries() int {
	c = c.withDefaults()
	return 1 + int(c.Short/Epoch) + int(c.Long/c.Short) + 1
}

// period is the counts of one epoch, or of a slab of epochs folded
// together.
type period struct {
	start, end time.Time
	sums       [numKinds]*Summary
	total      uint64
	rcodes     [17]uint64 // by rcode; [16]: no reply
	sources    [numSources]uint64
	epochs     int // epochs folded into a slab
}

// Tracker counts queries per epoch in one Summary per kind, and answers
// views over the last windows. Time is what callers pass in: Add counts
// into the epoch that Rotate last started. It is not safe for
// concurrent use.
type Tracker struct {
	cfg    TrackerConfig
	suffix Suffixer
	cur    *period
	recent []*period // closed epochs, oldest first; at most Short/Epoch
	slabs  []*period // older epochs by short window, oldest first
	// free are the summaries released, by kind: a summary keeps its
	// counters' key buffers, as long as that kind's keys.
	free [numKinds][]*Summary
	seed maphash.Seed // of every summary
	key  []byte
	name []byte
	// stride is k, the sampling of the summaries (see
	// TrackerConfig.Full): 1, every query.
	stride uint64
	rng    *rand.Rand
	// source is the source of its queries, for its views.
	source Source
}

// NewTracker returns a tracker whose first epoch starts at now
// (truncated to the epoch).
func NewTracker(cfg TrackerConfig, now time.Time) *Tracker {
	cfg = cfg.withDefaults()
	t := &Tracker{cfg: cfg, suffix: NewSuffixer(cfg.Zones), seed: maphash.MakeSeed(), stride: 1, rng: rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x51ab))}
	t.cur = t.newPeriod(now.Truncate(Epoch))
	return t
}

// Config is the tracker's configuration, with its defaults.
func (t *Tracker) Config() TrackerConfig { return t.cfg }

func (t *Tracker) newPeriod(start time.Time) *period {
	p := &period{start: start, end: start.Add(Epoch), epochs: 1}
	for k := range p.sums {
		p.sums[k] = t.summary(Kind(k))
	}
	return p
}

func (t *Tracker) summary(k Kind) *Summary {
	if n := len(t.free[k]); n > 0 {
		s := t.free[k][n-1]
		t.free[k] = t.free[k][:n-1]
		return s
	}
	return newSummary(t.cfg.Counters, t.seed, k == KindNameType)
}

func (t *Tracker) release(p *period) {
	for k, s := range p.sums {
		s.Reset()
		t.free[k] = append(t.free[k], s)
	}
}

// Add counts q in the current epoch.
func (t *Tracker) Add(q Query) {
	w := t.count(q.Rcode, q.Source)
	if w == 0 {
		return
	}
	t.name = appendLowerFQDN(t.name[:0], q.Name)
	t.add(q.Client, t.name, q.Type, w)
}

// Stride is the sampling of the summaries now: each query is counted
// in them with probability 1/Stride and weight Stride (see
// TrackerConfig.Full).
func (t *Tracker) Stride() uint64 { return t.stride }

// count counts one query in the totals, and returns the weight to count
// it with in the summaries: 0, not counted there (sampled out).
func (t *Tracker) count(rcode uint8, src Source) uint64 {
	p := t.cur
	p.total++
	if rcode < 16 {
		p.rcodes[rcode]++
	} else {
		p.rcodes[16]++
	}
	if src < numSources {
		p.sources[src]++
	}
	if t.cfg.Full < 0 {
		return 1
	}
	if p.total > uint64(t.cfg.Full)*t.stride {
		t.stride *= 2
	}
	if t.stride > 1 && t.rng.Uint64()&(t.stride-1) != 0 {
		return 0
	}
	return t.stride
}

// appendLowerFQDN appends name lower-cased and fully qualified.
func appendLowerFQDN(dst []byte, name string) []byte {
	if name == "" {
		return dst
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	if dst[len(dst)-1] != '.' {
		dst = append(dst, '.')
	}
	return dst
}

// add counts one query with weight w in the summaries; its name is
// lower-cased and fully qualified (empty: none).
func (t *Tracker) add(client netip.Addr, name []byte, qtype uint16, w uint64) {
	p := t.cur
	if client.IsValid() {
		client = client.Unmap()
		t.key = appendAddr(t.key[:0], client, false)
		p.sums[KindClient].AddBytes(t.key, w)
		t.key = appendAddr(t.key[:0], client, true)
		p.sums[KindPrefix].AddBytes(t.key, w)
	}
	if len(name) == 0 {
		return
	}
	// The name is hashed once: for itself, its (name, type) and its
	// suffix when that is the name itself (a GSLB name is often its
	// zone and one label).
	h := maphash.Bytes(t.seed, name)
	p.sums[KindName].add(name, h, w)
	if i := suffixStart(t.suffix.zones, name); i > 0 {
		p.sums[KindSuffix].AddBytes(name[i:], w)
	} else {
		p.sums[KindSuffix].add(name, h, w)
	}
	t.key = binary.BigEndian.AppendUint16(append(t.key[:0], name...), qtype)
	p.sums[KindNameType].add(t.key, typedHash(h, qtype), w)
}

// appendAddr appends a's bytes (4 or 16), those of its prefix (Prefix)
// when prefix is set.
func appendAddr(dst []byte, a netip.Addr, prefix bool) []byte {
	if a.Is4() {
		b := a.As4()
		if prefix {
			clear(b[PrefixBits4/8:])
		}
		return append(dst, b[:]...)
	}
	b := a.As16()
	if prefix {
		clear(b[PrefixBits6/8:])
	}
	return append(dst, b[:]...)
}

// Rotate closes every epoch that ended at or before now, and returns
// the totals of those closed (oldest first; none when the current epoch
// still runs). A gap of more than the long window closes it at once.
func (t *Tracker) Rotate(now time.Time) []EpochTotal {
	var closed []EpochTotal
	for !now.Before(t.cur.end) {
		p := t.cur
		closed = append(closed, p.totals())
		// The next epoch's sampling, from this one's rate.
		t.stride = 1
		for t.cfg.Full > 0 && p.total > uint64(t.cfg.Full)*t.stride {
			t.stride *= 2
		}
		next := p.end
		if now.Sub(next) > t.cfg.Long+t.cfg.Short {
			next = now.Truncate(Epoch).Add(-t.cfg.Long - t.cfg.Short)
		}
		t.recent = append(t.recent, p)
		t.cur = t.newPeriod(next)
		t.age()
	}
	return closed
}

// age folds the epochs beyond the short window into slabs and drops
// slabs beyond the long window.
func (t *Tracker) age() {
	keep := int(t.cfg.Short / Epoch)
	for len(t.recent) > keep {
		old := t.recent[0]
		t.recent = t.recent[1:]
		per := keep
		if n := len(t.slabs); n > 0 && t.slabs[n-1].epochs < per && !old.start.Before(t.slabs[n-1].end) {
			s := t.slabs[n-1]
			for k := range s.sums {
				s.sums[k].fold(old.sums[k])
			}
			s.end = old.end
			s.total += old.total
			s.epochs++
			for i := range s.rcodes {
				s.rcodes[i] += old.rcodes[i]
			}
			for i := range s.sources {
				s.sources[i] += old.sources[i]
			}
			t.release(old)
		} else {
			t.slabs = append(t.slabs, old)
		}
	}
	cut := t.cur.start.Add(-t.cfg.Long)
	for len(t.slabs) > 0 && !t.slabs[0].end.After(cut) {
		t.release(t.slabs[0])
		t.slabs = t.slabs[1:]
	}
}

// EpochTotal is what one closed epoch counted.
type EpochTotal struct {
	// Start is when the epoch began.
	Start time.Time
	// Queries is how many queries it counted.
	Queries uint64
	// Sources are its queries by source.
	Sources [numSources]uint64
}

func (p *period) totals() EpochTotal {
	return EpochTotal{Start: p.start, Queries: p.total, Sources: p.sources}
}

// View is the heavy hitters of one kind over a window.
type View struct {
	// Source is where the queries it counts were seen (a Pipeline keeps
	// each source's apart; a Tracker counting several says the first).
	Source Source
	// Kind is the kind of key.
	Kind Kind
	// Start and End are the time the view covers: whole closed epochs,
	// at most the window asked for (less when the tracker is younger).
	Start, End time.Time
	// Queries is how many queries of every key the view counted.
	Queries uint64
	// Rcodes are those queries by reply code (index 16: no reply).
	Rcodes [17]uint64
	// Entries are the heaviest keys, largest estimate first.
	Entries []ViewEntry
}

// Seconds is the time the view covers, in seconds (at least one epoch).
func (v View) Seconds() float64 { return max(v.End.Sub(v.Start), Epoch).Seconds() }

// ViewEntry is one heavy key of a View.
type ViewEntry struct {
	// Key is the key in presentation form: an address, a prefix, a
	// name, or a name and a type ("www.example.com. A").
	Key string
	// Count and Error bound its true count: Count - Error <= true
	// count <= Count.
	Count, Error uint64
	// Rate and RateError are Count and Error per second of the view.
	Rate, RateError float64
	// Share is Count over the view's Queries.
	Share float64
}

// View returns the top (at most top, all when top <= 0) keys of kind
// over the closed epochs of the last window (rounded up to whole
// epochs, and to whole short windows beyond the short window; at most
// the long window).
func (t *Tracker) View(kind Kind, window time.Duration, top int) View {
	v := View{Source: t.source, Kind: kind}
	var sums []*Summary
	var covered time.Duration
	take := func(p *period) {
		sums = append(sums, p.sums[kind])
		covered += p.end.Sub(p.start)
		v.Start = p.start
		if v.End.IsZero() {
			v.End = p.end
		}
		for i := range v.Rcodes {
			v.Rcodes[i] += p.rcodes[i]
		}
	}
	for i := len(t.recent) - 1; i >= 0 && covered < window; i-- {
		take(t.recent[i])
	}
	for i := len(t.slabs) - 1; i >= 0 && covered < window; i-- {
		take(t.slabs[i])
	}
	if kind >= numKinds || len(sums) == 0 {
		return v
	}
	entries, n := Merge(sums)
	v.Queries = n
	if top > 0 && len(entries) > top {
		entries = entries[:top]
	}
	secs := v.Seconds()
	v.Entries = make([]ViewEntry, len(entries))
	for i, e := range entries {
		v.Entries[i] = ViewEntry{Key: presentKey(kind, e.Key), Count: e.Est, Error: e.Err,
			Rate: float64(e.Est) / secs, RateError: float64(e.Err) / secs}
		if n > 0 {
			v.Entries[i].Share = float64(e.Est) / float64(n)
		}
	}
	return v
}

// presentKey is a summary key in presentation form.
func presentKey(kind Kind, key string) string {
	switch kind {
	case KindClient, KindPrefix:
		a, ok := netip.AddrFromSlice([]byte(key))
		if !ok {
			return key
		}
		if kind == KindClient {
			return a.String()
		}
		return Prefix(a).String()
	case KindNameType:
		if len(key) < 2 {
			return key
		}
		n := len(key) - 2
		qt := binary.BigEndian.Uint16([]byte(key[n:]))
		ts, ok := dns.TypeToString[qt]
		if !ok {
			ts = "TYPE" + strconv.Itoa(int(qt))
		}
		return key[:n] + " " + ts
	}
	return key
}
