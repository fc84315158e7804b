package flood

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
)

// The size of a Producer's batches: records and name bytes. Three
// batches per producer (one filling, one waiting, one spare) of 4096
// records and 128 KiB of names each: about 0.6 MiB per producer.
const (
	batchRecords   = 4096
	batchNameBytes = 128 << 10
	producerBatchs = 3
)

// record is one query in a batch: its name is names[off:off+n], in wire
// form (labels with their lengths, no final root label) when wire is
// set, else in presentation form.
type record struct {
	client netip.Addr
	off    uint32
	n      uint16
	qtype  uint16
	rcode  uint8
	source Source
	wire   bool
	named  bool // the query has a question
}

// batch is a Producer's buffer of queries, handed whole to the drainer.
type batch struct {
	recs  []record
	names []byte
}

func newBatch() *batch {
	return &batch{recs: make([]record, 0, batchRecords), names: make([]byte, 0, batchNameBytes)}
}

func (b *batch) full(name int) bool {
	return len(b.recs) == cap(b.recs) || len(b.names)+name > cap(b.names)
}

func (b *batch) reset() {
	b.recs, b.names = b.recs[:0], b.names[:0]
}

// Intake gathers the queries of many Producers for one drainer
// (Pipeline): each producer fills its own batch under its own lock and,
// when it is full, hands it over and takes a spare. Memory is bounded:
// a producer owns producerBatchs batches; when the drainer is behind and
// none is spare, queries are not recorded (Dropped counts them; the
// totals still count them).
type Intake struct {
	mu        sync.Mutex
	producers []*Producer
	free      []*batch
	ready     []*batch
	// wake has a value when a batch is ready.
	wake    chan struct{}
	dropped atomic.Uint64
}

// NewIntake returns an empty intake.
func NewIntake() *Intake {
	return &Intake{wake: make(chan struct{}, 1)}
}

// Wake has a value when a full batch waits for Drain.
func (in *Intake) Wake() <-chan struct{} { return in.wake }

// Dropped is how many queries were not recorded for want of a batch.
func (in *Intake) Dropped() uint64 { return in.dropped.Load() }

// Producer is one writer's way into an Intake (a UDP reader, the TCP
// connections together, one dnstap input). It is safe for concurrent
// use, but meant for one goroutine: its lock is then never contended
// but by the drainer, for the time of a swap.
type Producer struct {
	in     *Intake
	source Source
	mu     sync.Mutex
	cur    *batch
	total  uint64 // queries seen, recorded or not
	closed bool
}

// NewProducer returns a producer of queries from source, with its
// batches allocated now.
func (in *Intake) NewProducer(source Source) *Producer {
	p := &Producer{in: in, source: source, cur: newBatch()}
	in.mu.Lock()
	defer in.mu.Unlock()
	for range producerBatchs - 1 {
		in.free = append(in.free, newBatch())
	}
	in.producers = append(in.producers, p)
	return p
}

// Close hands the producer's last batch over and removes it; its
// spare batches are dropped, at once or as the drainer returns them.
func (p *Producer) Close() {
	p.mu.Lock()
	cur := p.cur
	p.cur, p.closed = nil, true
	p.mu.Unlock()
	in := p.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if cur != nil && len(cur.recs) > 0 {
		in.ready = append(in.ready, cur)
	}
	for i, q := range in.producers {
		if q == p {
			in.producers = append(in.producers[:i], in.producers[i+1:]...)
			break
		}
	}
	in.trimLocked()
}

// trimLocked drops the free batches beyond the spares of the producers
// left (in.mu held): a producer closed takes its spares with it, now or
// as the drainer returns them.
func (in *Intake) trimLocked() {
	if n := (producerBatchs - 1) * len(in.producers); len(in.free) > n {
		clear(in.free[n:])
		in.free = in.free[:n]
	}
}

// room returns the batch to write a record with a name of n bytes to,
// or nil (the query is dropped); p.mu is held.
func (p *Producer) room(n int) *batch {
	b := p.cur
	if b == nil {
		return nil
	}
	if !b.full(n) {
		return b
	}
	in := p.in
	in.mu.Lock()
	var spare *batch
	if k := len(in.free); k > 0 {
		spare = in.free[k-1]
		in.free = in.free[:k-1]
		in.ready = append(in.ready, b)
	}
	in.mu.Unlock()
	if spare == nil {
		return nil
	}
	p.cur = spare
	select {
	case in.wake <- struct{}{}:
	default:
	}
	return spare
}

// AddMessage records the DNS query msg from client and the reply to it
// (nil: none sent), as the responder's readers have them: the name and
// type of its first question (none when the message has no question, or
// its name is compressed or cut short) and the reply's response code.
// It copies the name and does not allocate.
func (p *Producer) AddMessage(client netip.Addr, msg, reply []byte) {
	rcode := uint8(NoRcode)
	if len(reply) >= 4 {
		rcode = reply[3] & 0xF
	}
	var name []byte
	var qtype uint16
	if len(msg) >= 12 && binary.BigEndian.Uint16(msg[4:]) > 0 {
		off := 12
		for off < len(msg) {
			l := int(msg[off])
			if l == 0 || l > 63 {
				break
			}
			off += 1 + l
		}
		if off+5 <= len(msg) && msg[off] == 0 {
			name = msg[12:off]
			qtype = binary.BigEndian.Uint16(msg[off+1:])
		}
	}
	p.mu.Lock()
	p.total++
	b := p.room(len(name))
	if b == nil {
		p.mu.Unlock()
		p.in.dropped.Add(1)
		return
	}
	off := len(b.names)
	b.names = append(b.names, name...)
	b.recs = append(b.recs, record{client: client, off: uint32(off), n: uint16(len(name)),
		qtype: qtype, rcode: rcode, source: p.source, wire: true, named: name != nil})
	p.mu.Unlock()
}

// Add records q (its Source is the producer's).
func (p *Producer) Add(q Query) {
	p.mu.Lock()
	p.total++
	b := p.room(len(q.Name))
	if b == nil {
		p.mu.Unlock()
		p.in.dropped.Add(1)
		return
	}
	off := len(b.names)
	b.names = append(b.names, q.Name...)
	b.recs = append(b.recs, record{client: q.Client, off: uint32(off), n: uint16(len(q.Name)),
		qtype: q.Type, rcode: q.Rcode, source: p.source, named: q.Name != ""})
	p.mu.Unlock()
}

// Drain hands every batch recorded so far (full ones, then what each
// producer has begun) to fn, and takes them back for reuse. It returns
// how many queries the producers saw since the last Drain, recorded or
// not, by source. Only one goroutine may drain.
func (in *Intake) Drain(fn func(*batch)) (seen [numSources]uint64) {
	in.handle(fn) // the full ones first: their return leaves spares
	in.mu.Lock()
	producers := append([]*Producer(nil), in.producers...)
	in.mu.Unlock()
	for _, p := range producers {
		p.mu.Lock()
		if p.source < numSources {
			seen[p.source] += p.total
		}
		p.total = 0
		if p.cur != nil && len(p.cur.recs) > 0 {
			in.mu.Lock()
			if k := len(in.free); k > 0 {
				in.ready = append(in.ready, p.cur)
				p.cur = in.free[k-1]
				in.free = in.free[:k-1]
			}
			in.mu.Unlock()
		}
		p.mu.Unlock()
	}
	in.handle(fn)
	return seen
}

// handle hands the ready batches to fn and returns them to the free.
func (in *Intake) handle(fn func(*batch)) {
	in.mu.Lock()
	ready := in.ready
	in.ready = nil
	in.mu.Unlock()
	for _, b := range ready {
		fn(b)
		b.reset()
	}
	in.mu.Lock()
	in.free = append(in.free, ready...)
	in.trimLocked()
	in.mu.Unlock()
}

// addBatch counts every record of b.
func (t *Tracker) addBatch(b *batch) { t.addBatchOf(b, numSources) }

// addBatchOf counts the records of b from source src (every record when
// src is numSources).
func (t *Tracker) addBatchOf(b *batch, src Source) {
	for i := range b.recs {
		r := &b.recs[i]
		if src != numSources && r.source != src {
			continue
		}
		w := t.count(r.rcode, r.source)
		if w == 0 {
			continue
		}
		raw := b.names[r.off : r.off+uint32(r.n)]
		switch {
		case !r.named:
			t.name = t.name[:0]
		case r.wire:
			t.name = appendWireName(t.name[:0], raw)
		default:
			t.name = appendLowerFQDN(t.name[:0], string(raw))
		}
		t.add(r.client, t.name, r.qtype, w)
	}
}

// appendWireName appends the wire-form name (labels without the root)
// lower-cased in presentation form, "." for the root. Label bytes are
// kept as they are: dots and other bytes that presentation would escape
// are rare in queries and are counted under the name so written.
func appendWireName(dst, wire []byte) []byte {
	if len(wire) == 0 {
		return append(dst, '.')
	}
	// Each label's length becomes the dot after it: the labels
	// shifted by one, then the dots put in.
	n := len(dst)
	dst = append(dst, wire[1:]...)
	dst = append(dst, '.')
	out := dst[n:]
	for i := int(wire[0]) + 1; i < len(wire); i += int(wire[i]) + 1 {
		out[i-1] = '.'
	}
	lower(out)
	return dst
}

// lower lower-cases the ASCII letters of b, eight bytes at a time: in
// each byte below 0x80, the top bit of its low seven bits plus 0x3f is
// set from 'A' on, plus 0x25 from past 'Z' on.
func lower(b []byte) {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		low := x &^ tops
		upper := (low + 0x3f*ones) &^ (low + 0x25*ones) &^ x & tops
		binary.LittleEndian.PutUint64(b, x|upper>>2)
		b = b[8:]
	}
	for i, c := range b {
		if c-'A' < 'Z'-'A'+1 {
			b[i] = c + 'a' - 'A'
		}
	}
}
