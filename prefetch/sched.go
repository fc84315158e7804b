package prefetch

import (
	"maps"
	"net/netip"
	"slices"
	"sort"
	"time"

	"lbdns/internal/timerheap"

	"github.com/miekg/dns"
)

// Scheduling constants.
const (
	// ExpiryMargin is how long after the estimated expiry of a cache entry
	// an expiry-mode query is sent, so that the entry is surely gone and
	// the query makes the resolver re-fetch.
	ExpiryMargin = 50 * time.Millisecond
	// MinGap is the shortest time between two queries of one entry.
	MinGap = 100 * time.Millisecond
	// MinBackoff and MaxBackoff bound the retry delay after failures; it
	// doubles with each consecutive failure.
	MinBackoff = time.Second
	MaxBackoff = 60 * time.Second
	// UncacheableDelay is the pause for an entry whose answers carry a
	// zero TTL: resolvers cannot cache it, so there is nothing to warm.
	UncacheableDelay = 60 * time.Second
	// BINDMinTTL is the eligibility of BIND's prefetch ("prefetch 2 9"):
	// answers whose original TTL is below 9 s are never prefetched.
	BINDMinTTL = 9 * time.Second
)

// Mode is how a resolver product refreshes a cached answer.
type Mode uint8

const (
	// Expiry products only re-fetch after the entry expired: the
	// prefetcher queries right after expiry.
	Expiry Mode = iota
	// Window products re-fetch early (in the background) when queried
	// inside a refresh window before expiry: the prefetcher queries in the
	// middle of that window.
	Window
)

// String returns "expiry" or "window".
func (m Mode) String() string {
	if m == Window {
		return "window"
	}
	return "expiry"
}

// Policy is the refresh behaviour of one resolver.
type Policy struct {
	// Mode is Window or Expiry.
	Mode Mode
	// Window is the refresh window as a time before expiry (BIND's
	// trigger); used when Percent is zero.
	Window time.Duration
	// Percent is the refresh window as a percentage of the original TTL
	// (unbound, PowerDNS Recursor).
	Percent int
	// MinTTL is the smallest original TTL the product prefetches (BIND:
	// 9 s); below it the entry is handled as Expiry.
	MinTTL time.Duration
}

// window returns the effective refresh window for an entry whose original
// TTL is orig, or 0 when the entry must be handled as Expiry. Resolvers
// keep TTLs in whole seconds, so windows are whole seconds too.
func (p Policy) window(orig time.Duration) time.Duration {
	if p.Mode != Window || orig < time.Second || orig < p.MinTTL {
		return 0
	}
	w := p.Window
	if p.Percent > 0 {
		// Rounded, not truncated: a product may report the TTL of a fresh
		// answer one second short (unbound with prefetch on: 9 for 10),
		// while it computes its window from the full TTL.
		w = (orig * time.Duration(p.Percent) / 100).Round(time.Second)
	}
	if w < time.Second || w >= orig {
		return 0
	}
	return w
}

// Key identifies one cache entry kept warm: a name and type in one
// resolver, for one ECS partition ("" for none).
type Key struct {
	Name      string
	Type      uint16
	Resolver  string
	Partition string
}

// String formats the key as "NAME/TYPE@RESOLVER[/PARTITION]".
func (k Key) String() string {
	s := k.Name + "/" + dns.TypeToString[k.Type] + "@" + k.Resolver
	if k.Partition != "" {
		s += "/" + k.Partition
	}
	return s
}

// Spec is one entry to keep warm: where to send the query and how the
// resolver refreshes.
type Spec struct {
	Key Key
	// Addr is the resolver's own address (not a VIP).
	Addr netip.AddrPort
	// ECS, when valid, is sent as EDNS Client Subnet with a full-length
	// prefix.
	ECS    netip.Addr
	Policy Policy
}

// Outcome is the result of one prefetch query.
type Outcome struct {
	// OK is true for a usable answer (NOERROR or NXDOMAIN).
	OK bool
	// TTL is the smallest TTL of the answer (or of the SOA of a negative
	// answer), as the resolver gave it: the remaining life of its cache
	// entry.
	TTL time.Duration
	// RTT is how long the answer took.
	RTT time.Duration
	// Scope is the SCOPE PREFIX-LENGTH of the answer's ECS option: the
	// client subnets the resolver's cache entry serves. Zero when the
	// answer carries no ECS option or scope 0: the entry serves every
	// client, so every partition's query of the name and type at that
	// resolver reads the same entry.
	Scope int
	// Detail says what failed (rcode, timeout, network error).
	Detail string
}

// Counters count what happened to one entry (or, summed, to all).
type Counters struct {
	// Queries sent.
	Queries uint64
	// Failures: SERVFAIL, REFUSED, timeouts, network errors.
	Failures uint64
	// Fetches: answers that carried the full original TTL, that is,
	// answers the resolver had just fetched from upstream. An answer that
	// another entry reading the same cache entry (another ECS partition of
	// the name and type at the resolver, the answer's scope covering both)
	// counted less than a second before is the same fetch: counted once.
	Fetches uint64
	// FoundExpired: for window-mode entries, answers that showed the
	// entry had expired (a fresh full TTL where a cached remaining TTL
	// was expected): a miss the prefetcher could not prevent.
	FoundExpired uint64
}

// Add returns the sum of c and o.
func (c Counters) Add(o Counters) Counters {
	return Counters{c.Queries + o.Queries, c.Failures + o.Failures, c.Fetches + o.Fetches, c.FoundExpired + o.FoundExpired}
}

// Status is the visible state of one entry (see Scheduler.Snapshot).
type Status struct {
	Key  Key
	Addr netip.AddrPort
	// Mode is the mode in effect: Window only when the product has one and
	// the entry is eligible for it.
	Mode Mode
	// Healthy is false while the resolver is down or disabled: the entry
	// is parked and resumes on recovery.
	Healthy  bool
	InFlight bool
	// LastRefresh is when the last successful answer arrived (zero: never).
	LastRefresh time.Time
	// LastTTL is the TTL of that answer; OriginalTTL the largest TTL seen.
	LastTTL, OriginalTTL time.Duration
	// Remaining is the estimated remaining life of the cache entry (zero
	// when expired or unknown).
	Remaining time.Duration
	// NextRun is when the next query is due (zero while parked or in
	// flight).
	NextRun time.Time
	// Gap is, for the last answer that was a re-fetch after expiry, how
	// long after the estimated expiry it arrived: the time in which a
	// client query also had to wait for the recursion. MaxGap is the
	// longest such gap since the entry was created.
	Gap, MaxGap time.Duration
	// Expired is true when the last re-fetch found the entry expired
	// although its mode is Window: the product did not refresh in its
	// window, and clients met the expiry (Counters.FoundExpired counts
	// every such time).
	Expired             bool
	ConsecutiveFailures int
	LastError           string
	Counters            Counters
}

type entry struct {
	spec Spec
	idx  int // index in the heap, -1 when not queued
	next time.Time

	inflight bool
	// maxTTL is the largest TTL seen: the original TTL, since a freshly
	// fetched answer carries it in full.
	maxTTL time.Duration
	// expires is the estimated expiry: the whole second at which the
	// resolver's entry reaches TTL 0.
	expires     time.Time
	lastRefresh time.Time
	lastTTL     time.Duration
	// late is set once the resolver answered from cache with TTL 0: it
	// keeps an entry through the second it reaches 0 (unbound, dnsmasq),
	// so expiry-mode queries aim one second later.
	late      bool
	expectHit bool
	gap       time.Duration
	maxGap    time.Duration
	// expired is set when a window entry's read after the old expiry
	// found a fresh answer (the product had not refreshed in its
	// window), cleared when it found the entry renewed in time.
	expired bool
	// fetchAt is when the entry's last fresh answer arrived: an answer of
	// a sibling within a second of it is the same upstream fetch.
	fetchAt time.Time
	fails   int
	lastErr string
	c       Counters
}

// Scheduler is the pure core of the prefetcher: it keeps one entry per
// Spec, decides when each is queried next, and parks the entries of
// unhealthy resolvers. It does no I/O and reads no clock: every method
// takes now. It is not safe for concurrent use.
type Scheduler struct {
	// Jitter is the largest random delay added to a scheduled query.
	Jitter time.Duration
	// Rand returns a random duration in [0, n); tests set it to return 0.
	// n is always > 0.
	Rand func(n time.Duration) time.Duration

	entries map[Key]*entry
	// groups are the entries of each name and type at one resolver, by
	// partition: the entries that may share the resolver's cache entry.
	groups  map[groupKey][]*entry
	queue   timerheap.Heap[*entry]
	healthy map[string]bool
}

// groupKey is a Key without its partition.
type groupKey struct {
	Name     string
	Type     uint16
	Resolver string
}

func groupOf(k Key) groupKey { return groupKey{k.Name, k.Type, k.Resolver} }

// NewScheduler returns an empty scheduler. rnd returns a random duration
// in [0, n); nil means no jitter.
func NewScheduler(jitter time.Duration, rnd func(n time.Duration) time.Duration) *Scheduler {
	if rnd == nil {
		rnd = func(time.Duration) time.Duration { return 0 }
	}
	return &Scheduler{Jitter: jitter, Rand: rnd, entries: map[Key]*entry{}, groups: map[groupKey][]*entry{}, healthy: map[string]bool{}}
}

func (s *Scheduler) jitter(max time.Duration) time.Duration {
	if max > s.Jitter {
		max = s.Jitter
	}
	if max <= 0 {
		return 0
	}
	return s.Rand(max)
}

// Len returns the number of entries.
func (s *Scheduler) Len() int { return len(s.entries) }

// Set makes specs the entries. Entries whose Key is unchanged keep their
// state (TTLs learned, counters, schedule); a changed address or policy is
// taken over. New entries of healthy resolvers are due at once (plus
// jitter); removed entries are dropped (a query in flight is ignored when
// it ends).
func (s *Scheduler) Set(specs []Spec, now time.Time) {
	keep := make(map[Key]bool, len(specs))
	for _, sp := range specs {
		keep[sp.Key] = true
		if e, ok := s.entries[sp.Key]; ok {
			e.spec = sp
			continue
		}
		e := &entry{spec: sp, idx: -1}
		s.entries[sp.Key] = e
		g := groupOf(sp.Key)
		s.groups[g] = append(s.groups[g], e)
		if s.healthy[sp.Key.Resolver] {
			s.push(e, now.Add(s.jitter(s.Jitter)))
		}
	}
	for k, e := range s.entries {
		if !keep[k] {
			s.unqueue(e)
			delete(s.entries, k)
			g := groupOf(k)
			if s.groups[g] = slices.DeleteFunc(s.groups[g], func(o *entry) bool { return o == e }); len(s.groups[g]) == 0 {
				delete(s.groups, g)
			}
		}
	}
}

// SetHealthy says which resolvers are healthy and enabled (true); every
// other resolver's entries are parked. Entries of a resolver that became
// healthy are due at once (plus jitter).
func (s *Scheduler) SetHealthy(healthy map[string]bool, now time.Time) {
	old := s.healthy
	s.healthy = make(map[string]bool, len(healthy))
	for r, ok := range healthy {
		if ok {
			s.healthy[r] = true
		}
	}
	if maps.Equal(old, s.healthy) {
		return // the daemon tells this every plan; most of the time nothing changed
	}
	for _, e := range s.entries {
		r := e.spec.Key.Resolver
		switch {
		case s.healthy[r] && !old[r] && !e.inflight && e.idx < 0:
			s.push(e, now.Add(s.jitter(s.Jitter)))
		case !s.healthy[r]:
			s.unqueue(e)
		}
	}
}

// Next returns when the earliest queued entry is due; false when none is
// queued.
func (s *Scheduler) Next() (time.Time, bool) {
	if s.queue.Len() == 0 {
		return time.Time{}, false
	}
	return (*s.queue.At(0)).next, true
}

// Pop returns the earliest entry due at now and marks it in flight; false
// when none is due. The caller must call Done for it.
func (s *Scheduler) Pop(now time.Time) (Spec, bool) {
	if s.queue.Len() == 0 || (*s.queue.At(0)).next.After(now) {
		return Spec{}, false
	}
	e := s.queue.Pop()
	e.inflight = true
	e.c.Queries++
	return e.spec, true
}

// Done records the outcome of the query of key sent by Pop and schedules
// the entry's next query, which it returns (zero when the entry is gone
// or parked).
func (s *Scheduler) Done(key Key, o Outcome, now time.Time) time.Time {
	e, ok := s.entries[key]
	if !ok || !e.inflight {
		return time.Time{}
	}
	e.inflight = false
	next := s.observe(e, o, now)
	if !s.healthy[key.Resolver] {
		return time.Time{}
	}
	s.push(e, next)
	return next
}

// observe updates e with an outcome and returns its next run time.
func (s *Scheduler) observe(e *entry, o Outcome, now time.Time) time.Time {
	if !o.OK {
		e.fails++
		e.c.Failures++
		e.lastErr = o.Detail
		back := MaxBackoff
		if e.fails <= 7 {
			back = min(MinBackoff<<(e.fails-1), MaxBackoff)
		}
		return now.Add(back + s.jitter(back/4))
	}
	e.fails, e.lastErr = 0, ""
	r := max(o.TTL, 0).Truncate(time.Second)
	prevMax := e.maxTTL
	if r > e.maxTTL {
		e.maxTTL = r
	}
	fresh := r > 0 && r >= e.maxTTL
	// dead is when the previous entry was gone: its expiry, one second
	// later for products that serve through the zero second.
	dead := e.expires
	if e.late {
		dead = dead.Add(time.Second)
	}
	if fresh {
		// A fresh answer before the old entry's expiry is someone else's
		// early refresh (the product's prefetch, triggered by a client);
		// after it, the entry had expired before the prefetcher came.
		expired := e.expectHit && prevMax > 0 && !now.Before(dead)
		if !s.sameFetch(e, o.Scope, now) {
			e.c.Fetches++
			if expired {
				e.c.FoundExpired++
			}
		}
		e.fetchAt = now
		if !e.expires.IsZero() && !now.Before(dead) && now.Sub(dead) < MaxBackoff {
			e.gap = now.Sub(dead)
			e.maxGap = max(e.maxGap, e.gap)
		}
	}
	// A window entry's read after the old expiry tells whether the
	// product refreshed in time (a renewed cached TTL) or not (a fresh one).
	switch {
	case !e.expectHit || prevMax == 0:
		e.expired = false
	case !now.Before(dead):
		e.expired = fresh
	}
	e.lastRefresh, e.lastTTL = now, r
	if e.maxTTL < time.Second {
		e.expires = now
		e.expectHit = false
		return now.Add(UncacheableDelay)
	}
	if r == 0 {
		e.late = true
	}
	// The resolver counts in whole seconds on the same clock: a remaining
	// TTL of r at now means the entry reaches 0 at the start of second
	// floor(now)+r.
	e.expires = now.Truncate(time.Second).Add(r)
	after := e.expires.Add(ExpiryMargin)
	if e.late {
		after = after.Add(time.Second)
	}
	var next time.Time
	if w := e.spec.Policy.window(e.maxTTL); w > 0 {
		e.expectHit = true
		target := e.expires.Add(-w / 2)
		if now.Before(target.Add(-w / 4)) {
			// Aim at the middle of the window, jittered within its middle half.
			q := min(s.Jitter, w/2)
			next = target.Add(-q / 2).Add(s.jitter(q))
		} else {
			// Inside the window: the product is refreshing now; read the
			// refreshed entry once the old one is gone.
			next = after.Add(s.jitter(s.Jitter))
		}
	} else {
		e.expectHit = false
		next = after.Add(s.jitter(s.Jitter))
	}
	if min := now.Add(MinGap); next.Before(min) {
		next = min
	}
	return next
}

// sameFetch reports whether a fresh answer to e at now, whose ECS scope
// is scope, is the upstream fetch a sibling entry (another partition of
// the name and type at the resolver) counted less than a second before
// or after: the answer's scope covers both partitions' addresses, so the
// resolver answered both from one cache entry. A resolver refetches one
// entry at most once per TTL, a whole number of seconds; the answers to
// the queries of one fetch arrive within a round trip of each other.
func (s *Scheduler) sameFetch(e *entry, scope int, now time.Time) bool {
	for _, o := range s.groups[groupOf(e.spec.Key)] {
		if o == e || o.fetchAt.IsZero() {
			continue
		}
		if d := now.Sub(o.fetchAt); d < time.Second && d > -time.Second && sharedEntry(e.spec.ECS, o.spec.ECS, scope) {
			return true
		}
	}
	return false
}

// sharedEntry reports whether queries with ECS addresses a and b (invalid:
// no ECS) read one cache entry whose answer has ECS scope scope: always
// for scope 0 (or no ECS in the answer); otherwise when both addresses
// are of one family and agree on the first scope bits.
func sharedEntry(a, b netip.Addr, scope int) bool {
	if scope <= 0 {
		return true
	}
	if !a.IsValid() || !b.IsValid() || a.Is4() != b.Is4() || scope > a.BitLen() {
		return a == b
	}
	pa, _ := a.Prefix(scope)
	pb, _ := b.Prefix(scope)
	return pa == pb
}

// Snapshot returns the state of every entry, sorted by key.
func (s *Scheduler) Snapshot(now time.Time) []Status {
	out := make([]Status, 0, len(s.entries))
	for _, e := range s.entries {
		st := Status{
			Key: e.spec.Key, Addr: e.spec.Addr, Mode: Expiry,
			Healthy: s.healthy[e.spec.Key.Resolver], InFlight: e.inflight,
			LastRefresh: e.lastRefresh, LastTTL: e.lastTTL, OriginalTTL: e.maxTTL,
			Gap: e.gap, MaxGap: e.maxGap, Expired: e.expired, ConsecutiveFailures: e.fails, LastError: e.lastErr, Counters: e.c,
		}
		if e.spec.Policy.window(e.maxTTL) > 0 || e.maxTTL == 0 && e.spec.Policy.Mode == Window {
			st.Mode = Window
		}
		if e.expires.After(now) {
			st.Remaining = e.expires.Sub(now)
		}
		if e.idx >= 0 {
			st.NextRun = e.next
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].Key, out[j].Key) })
	return out
}

// Totals returns the counters summed over every entry.
func (s *Scheduler) Totals() Counters {
	var c Counters
	for _, e := range s.entries {
		c = c.Add(e.c)
	}
	return c
}

func less(a, b Key) bool {
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Type != b.Type {
		return a.Type < b.Type
	}
	if a.Resolver != b.Resolver {
		return a.Resolver < b.Resolver
	}
	return a.Partition < b.Partition
}

func (s *Scheduler) push(e *entry, at time.Time) {
	e.next = at
	if e.idx >= 0 {
		s.queue.Fix(e.idx)
		return
	}
	s.queue.Push(e)
}

func (s *Scheduler) unqueue(e *entry) {
	if e.idx >= 0 {
		s.queue.Remove(e.idx)
	}
}

// Before orders the queue by next run time, then by key
// (timerheap.Item).
func (e *entry) Before(o *entry) bool {
	if !e.next.Equal(o.next) {
		return e.next.Before(o.next)
	}
	return less(e.spec.Key, o.spec.Key)
}

// SetIndex records e's place in the queue (timerheap.Item).
func (e *entry) SetIndex(i int) { e.idx = i }

// PolicyFor returns the refresh policy of a configured resolver.
func PolicyFor(vendor, refresh string, window time.Duration, percent int) Policy {
	if refresh != "window" {
		return Policy{Mode: Expiry}
	}
	p := Policy{Mode: Window, Window: window, Percent: percent}
	if vendor == "bind" {
		p.MinTTL = BINDMinTTL
	}
	return p
}
