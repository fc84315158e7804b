package intake

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/dnstap"
)

// Limits of the per-sender view.
const (
	// MaxSenders is how many sender identities are tracked one by one;
	// messages of more count under OtherSenders.
	MaxSenders = 64
	// RecentPerSender is how many of each sender's latest client
	// messages are kept.
	RecentPerSender = 8
	// OtherSenders is the identity under which the senders beyond
	// MaxSenders count.
	OtherSenders = "(others)"
	// NoIdentity is the identity of senders that send none.
	NoIdentity = "(none)"
)

// Sender is what the intake knows of one sender identity.
type Sender struct {
	// Identity is the sender's dnstap identity (NoIdentity when it sends
	// none, OtherSenders for those beyond MaxSenders).
	Identity string
	// Version is the version it sent last.
	Version string
	// Messages counts its client messages.
	Messages uint64
	// Last is when the intake received its latest client message.
	Last time.Time
	// Recent holds its latest client messages, newest first.
	Recent []Recent
}

// Recent is one client message as the per-sender view keeps it.
type Recent struct {
	Received time.Time
	Type     dnstap.Type
	Client   netip.Addr
	Name     string
	QType    uint16
	Rcode    int
}

// sender is one tracked identity.
type sender struct {
	counter prometheus.Counter

	mu       sync.Mutex // guards the fields below
	version  string
	messages uint64
	last     time.Time
	recent   [RecentPerSender]Recent
	next     int // index in recent of the next message
}

// senders tracks at most MaxSenders identities, and the others together.
type senders struct {
	vec *prometheus.CounterVec
	now func() time.Time

	mu sync.Mutex // guards by
	by map[string]*sender
}

func newSenders(vec *prometheus.CounterVec, now func() time.Time) *senders {
	return &senders{vec: vec, now: now, by: map[string]*sender{}}
}

// get returns the tracked entry of identity.
func (ss *senders) get(identity string) *sender {
	if identity == "" {
		identity = NoIdentity
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.by[identity]; ok {
		return s
	}
	if len(ss.by) >= MaxSenders {
		identity = OtherSenders
		if s, ok := ss.by[identity]; ok {
			return s
		}
	}
	s := &sender{counter: ss.vec.WithLabelValues(identity)}
	ss.by[strings.Clone(identity)] = s
	return s
}

// note records m as s's latest message.
func (s *sender) note(m *dnstap.Message, now time.Time) {
	s.counter.Inc()
	s.mu.Lock()
	s.version = m.Version
	s.messages++
	s.last = now
	s.recent[s.next] = Recent{Received: now, Type: m.Type, Client: m.Client, Name: m.Name, QType: m.QType, Rcode: m.Rcode}
	s.next = (s.next + 1) % RecentPerSender
	s.mu.Unlock()
}

// list returns every tracked sender, sorted by identity.
func (ss *senders) list() []Sender {
	ss.mu.Lock()
	ids := make([]string, 0, len(ss.by))
	for id := range ss.by {
		ids = append(ids, id)
	}
	entries := make([]*sender, len(ids))
	slices.Sort(ids)
	for i, id := range ids {
		entries[i] = ss.by[id]
	}
	ss.mu.Unlock()
	out := make([]Sender, len(ids))
	for i, s := range entries {
		s.mu.Lock()
		out[i] = Sender{Identity: ids[i], Version: s.version, Messages: s.messages, Last: s.last}
		for k := 1; k <= RecentPerSender && uint64(k) <= s.messages; k++ {
			out[i].Recent = append(out[i].Recent, s.recent[(s.next-k+RecentPerSender)%RecentPerSender])
		}
		s.mu.Unlock()
	}
	return out
}
