// Package feed is the dnstap component ([dnstap]): the intake of the
// resolvers' dnstap feeds (package intake) bound from the configuration,
// every CLIENT_QUERY counted by the flood alarms with its client, the
// messages handed to a consumer, and the intake's status.
package feed

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/dnstap"
	"lbdns/dnstap/intake"
	"lbdns/flood"
)

// stopTimeout bounds the close of the dnstap connections when
// lbdnsd stops.
const stopTimeout = 5 * time.Second

// Consumer takes the client messages of the dnstap intake
// ([dnstap]): each CLIENT_QUERY and CLIENT_RESPONSE a resolver sends,
// decoded. ObserveDnstap is called from the intake's connection
// goroutines, concurrently for different connections; m is valid only
// during the call (its strings may be kept), and a slow consumer slows
// the sender's connection, never the rest of the daemon.
type Consumer interface {
	ObserveDnstap(m *dnstap.Message)
}

// Options configure a Feed.
type Options struct {
	// Config is the configuration at start ([dnstap], daemon
	// reserved_fds; a restart changes them).
	Config *configs.Config
	// Flood, when set, counts every CLIENT_QUERY.
	Flood *flood.Pipeline
	// Consumer, when set, sees every client message.
	Consumer Consumer
	// Registerer receives the intake's metrics.
	Registerer prometheus.Registerer
	// Logger receives the logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Feed is the dnstap component; nil without [dnstap] (its methods are
// then those of a component that listens to nothing).
type Feed struct {
	srv *intake.Server
	log *slog.Logger
}

// New builds the intake of o.Config and binds its listeners (nil
// without [dnstap]). Connections are served from Run.
func New(o Options) (*Feed, error) {
	c := o.Config.Dnstap
	if c == nil {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	srv, err := intake.New(intake.Config{
		Unix: c.Unix, TCP: c.TCP, MaxConnections: c.MaxConnections, MaxPerSource: c.MaxConnectionsPerSource, IdleTimeout: idleTimeout(c.IdleTimeout.Duration), MaxFrame: c.MaxFrame,
		HandshakeTimeout: c.HandshakeTimeout.Duration, Now: o.Now, ReservedFDs: o.Config.Daemon.ReservedFDs,
	}, handler(o.Flood, o.Consumer), o.Registerer, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("dnstap: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return &Feed{srv: srv, log: o.Logger}, nil
}

// idleTimeout is [dnstap] idle_timeout as the intake takes it: 0s,
// never, is negative there.
func idleTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// handler is what takes each client message of the intake: the flood
// pipeline counts every CLIENT_QUERY (its client, name and type;
// responses are not counted, so that a resolver sending both counts
// each query once), and the consumer, when set, sees every message.
// Nil when neither wants them.
func handler(p *flood.Pipeline, consumer Consumer) intake.Handler {
	var fp *flood.Producer
	if p != nil {
		fp = p.Producer(flood.SourceDnstap) // shared by the connections: safe for concurrent use
	}
	if consumer == nil && fp == nil {
		return nil
	}
	return func(m *dnstap.Message) {
		if fp != nil && m.Type == dnstap.ClientQuery {
			fp.Add(flood.Query{Client: m.Client, Name: m.Name, Type: m.QType, Rcode: flood.NoRcode, Source: flood.SourceDnstap})
		}
		if consumer != nil {
			consumer.ObserveDnstap(m)
		}
	}
}

// Run serves the intake's connections until ctx is done, then closes
// them; the returned channel is closed when it has.
func (f *Feed) Run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if f == nil {
		close(done)
		return done
	}
	f.srv.Serve()
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := f.srv.Shutdown(sctx); err != nil {
			f.log.Warn("dnstap intake stop", "err", err)
		}
	}()
	return done
}

// Status is the intake in /status (nil without [dnstap]).
func (f *Feed) Status() *control.DnstapStatus {
	if f == nil {
		return nil
	}
	d := f.srv
	st := &control.DnstapStatus{Open: d.Open(), Senders: []control.DnstapSender{}}
	for _, a := range d.Addrs() {
		st.Listeners = append(st.Listeners, a.String())
	}
	for _, s := range d.Senders() {
		cs := control.DnstapSender{Identity: s.Identity, Version: s.Version, Messages: s.Messages, Last: s.Last, Recent: []control.DnstapMessage{}}
		for _, r := range s.Recent {
			m := control.DnstapMessage{Received: r.Received, Type: r.Type.String(), Client: r.Client.String(), Name: r.Name, QType: dns.Type(r.QType).String()}
			if r.Rcode >= 0 {
				m.Rcode = dns.RcodeToString[r.Rcode]
			}
			cs.Recent = append(cs.Recent, m)
		}
		st.Senders = append(st.Senders, cs)
	}
	return st
}
