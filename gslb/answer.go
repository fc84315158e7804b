package gslb

import (
	"net/netip"

	"github.com/miekg/dns"
)

// This file is the contract between the three parts of the GSLB
// responder: the topology (package gslb/topology: where a client is), the
// selection (this package: which records answer a question, pure, from a
// snapshot of the configuration and the members' health), and the server
// (package responder: DNS on the wire, EDNS, ECS, truncation, TCP).

// Location is where a client address is, as the topology map says.
type Location struct {
	// Labels are the location labels of the address by level (for
	// example "carrier": "cmcc", "province": "gd"); empty when the map
	// has no entry for it.
	Labels map[string]string
	// Prefix is the most specific map entry that matched (invalid when
	// none did).
	Prefix netip.Prefix
	// Scope is the prefix length over which this location holds for the
	// address: every address within Scope bits of it has the same labels,
	// and the scope prefix overlaps no more specific entry of the map
	// (RFC 7871 section 7.2.1). 0 when the map has no entry at all that
	// could apply to the address's family.
	Scope int
}

// Locator maps a client address to its location. Implementations are
// read-only after construction and safe for concurrent use.
type Locator interface {
	Locate(addr netip.Addr) Location
}

// Query is one question to the responder, already parsed and checked by
// the server.
type Query struct {
	// Name is the question name, lower-cased and fully qualified.
	Name string
	// Type is the question type (dns.TypeA, dns.TypeAAAA, ...).
	Type uint16
	// Source is the address the query came from (the recursive resolver).
	Source netip.Addr
	// ECS is the EDNS Client Subnet source prefix the query carried,
	// masked to its source prefix length, in the option's family (an
	// IPv4-mapped IPv6 prefix for FAMILY 2 with a mapped ADDRESS);
	// invalid when it carried none. A SOURCE PREFIX-LENGTH of 0 is a
	// valid prefix of length 0: the client asks not to be located by
	// it, and the query is answered as one without ECS. A mapped prefix
	// is located as the IPv4 prefix it maps (its length less 96), a
	// mapped /96 as SOURCE 0.
	ECS netip.Prefix
	// Explain asks for Response.Trace.
	Explain bool
	// Rotation, when it holds Snapshot.Rotations() counters, rotates
	// the answers of rr, wrr, all and priority pools in place of the
	// snapshot's shared counters (one per pool): a caller answering
	// from one goroutine at a time (a UDP reader) passes its own, so
	// concurrent callers write no shared memory. nil: the shared ones.
	Rotation []uint64
	// Entry, when it is of the snapshot asked (Snapshot.Lookup of
	// Name), is the name's entry: the answer does not look Name up
	// again. The zero Entry: Name is looked up.
	Entry Entry
	// Records, when set, holds the records of the answer (see Records):
	// a caller answering one query at a time passes its own, so that a
	// dynamic name's answer allocates nothing. nil: they are allocated.
	Records *Records
}

// Response is the responder's answer to a Query, before it is put on the
// wire.
type Response struct {
	// Rcode is the DNS response code: dns.RcodeSuccess (with or without
	// answers: NODATA), dns.RcodeNameError, dns.RcodeRefused (a name
	// outside every zone), dns.RcodeServerFailure (a last resort).
	Rcode int
	// Answer, Authority and Extra are the sections' records (the SOA in
	// Authority for negative answers).
	Answer, Authority, Extra []dns.RR
	// Scope is the ECS SCOPE PREFIX-LENGTH for the reply when the query
	// carried ECS, in the family of Query.ECS (an IPv4 scope plus 96
	// for a mapped prefix): 0 when the answer does not depend on the
	// client's address (a last resort every client would get
	// included), else the location's scope (a last resort's too, when
	// other locations may still get policy answers).
	Scope int
	// Trace says how the answer was chosen when Query.Explain was set.
	Trace *Trace
	// Name, Policy, Pool and LastResort say what answered without a
	// Trace, for the server's metrics (labels bounded by the
	// configuration; set them from the configuration's strings, no
	// allocation per query): the GSLB name ("" for zone data, static
	// records and names outside the zones), the answering policy's match
	// as "level=value+level=value" ("global" for an empty match, "" when
	// no policy answered), the pool whose members answered ("" when
	// none), the last resort taken ("fail-open", "static", "servfail";
	// "" when none).
	Name, Policy, Pool, LastResort string
	// Raised is set when an operator's TTL raise gave the answer its TTL.
	Raised bool
}

// Answerer answers queries. Implementations are immutable snapshots, safe
// for concurrent use; a new snapshot replaces the old one atomically.
type Answerer interface {
	Answer(q Query) Response
}

// Trace is how one answer was chosen: what lbctl gslb explain prints. It
// is filled by the same code path that answers, never recomputed.
type Trace struct {
	// Name is the GSLB name that answered ("" for static records, zone
	// data and names outside every zone).
	Name string
	// Client is the address the location was looked up for, and
	// ClientFrom where it came from: "ecs" or "source".
	Client     netip.Addr
	ClientFrom string
	// Location is the topology's answer for Client.
	Location Location
	// Policies are the name's policies in the order they were tried.
	Policies []PolicyTrace
	// LastResort is the last resort taken ("" when a policy answered):
	// "fail-open", "static" or "servfail"; Warming is set when it was
	// taken because members were still without a verdict.
	LastResort string
	Warming    bool
	// Static is set when the name answered its static set (emergency
	// mode or the static last resort).
	Static bool
	// Answer lists the addresses answered; TTL and Scope are the reply's.
	Answer []netip.Addr
	TTL    uint32
	Scope  int
}

// PolicyTrace is one policy of a name as it was tried.
type PolicyTrace struct {
	// Match is the policy's match on location labels (empty: global).
	Match map[string]string
	// Matched is set when the client's location matched it.
	Matched bool
	// Pools are the pools tried for it, the policy's own first, then its
	// fallback chain.
	Pools []PoolTrace
	// Answered is set when this policy gave the answer.
	Answered bool
}

// PoolTrace is one pool as it was tried.
type PoolTrace struct {
	Name      string
	Algorithm string
	// Members are the pool's members with their states; Chosen marks
	// those answered.
	Members []MemberTrace
	// Healthy is the number of members up.
	Healthy int
}

// MemberTrace is one member of a pool as the algorithm saw it.
type MemberTrace struct {
	Name   string
	Addr   netip.Addr
	State  string
	Weight int
	Chosen bool
}
