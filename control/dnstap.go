package control

import "time"

// DnstapStatus is the dnstap intake in /status (absent without
// [dnstap]).
type DnstapStatus struct {
	// Listeners are the addresses it listens on: a Unix socket's path, a
	// TCP address.
	Listeners []string `json:"listeners"`
	// Open is how many connections are open.
	Open int `json:"open"`
	// Senders are the resolvers heard from, by dnstap identity (at most
	// 64, and "(others)"), sorted by identity.
	Senders []DnstapSender `json:"senders"`
}

// DnstapSender is one sender identity of the dnstap intake.
type DnstapSender struct {
	// Identity is the sender's dnstap identity; "(none)" for senders
	// that send none, "(others)" for those beyond the first 64.
	Identity string `json:"identity"`
	// Version is the version it sent last.
	Version string `json:"version,omitempty"`
	// Messages counts its client queries and responses.
	Messages uint64 `json:"messages"`
	// Last is when its latest client message arrived.
	Last time.Time `json:"last"`
	// Recent are its latest client messages, newest first (at most 8).
	Recent []DnstapMessage `json:"recent"`
}

// DnstapMessage is one client message of a dnstap sender.
type DnstapMessage struct {
	// Received is when it arrived.
	Received time.Time `json:"received"`
	// Type is client_query or client_response.
	Type string `json:"type"`
	// Client is the resolver's client.
	Client string `json:"client"`
	// Name and QType are the question's.
	Name  string `json:"name"`
	QType string `json:"qtype"`
	// Rcode is the response's rcode, absent on a query.
	Rcode string `json:"rcode,omitempty"`
}
