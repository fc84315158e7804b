package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/dnstap"
	"lbdns/dnstap/intake"
	"lbdns/flood"
)

// dnstapStopTimeout bounds the close of the dnstap connections when
// lbdnsd stops.
const dnstapStopTimeout = 5 * time.Second

// DnstapConsumer takes the client messages of the dnstap intake
// ([dnstap]): each CLIENT_QUERY and CLIENT_RESPONSE a resolver sends,
// decoded. ObserveDnstap is called from the intake's connection
// goroutines, concurrently for different connections; m is valid only
// during the call (its strings may be kept), and a slow consumer slows
// the sender's connection, never the rest of the daemon.
type DnstapConsumer interface {
	ObserveDnstap(m *dnstap.Message)
}

// newDnstap builds the dnstap intake of cfg and binds its listeners
// (nil without [dnstap]). Connections are served from Run.
func (d *Daemon) newDnstap(cfg *configs.Config) (*intake.Server, error) {
	c := cfg.Dnstap
	if c == nil {
		return nil, nil
	}
	handle := d.dnstapHandler()
	srv, err := intake.New(intake.Config{
		Unix: c.Unix, TCP: c.TCP, MaxConnections: c.MaxConnections, MaxFrame: c.MaxFrame,
		HandshakeTimeout: c.HandshakeTimeout.Duration, Now: d.now, ReservedFDs: cfg.Daemon.ReservedFDs,
	}, handle, d.registry, d.log.With("component", "dnstap"))
	if err != nil {
		return nil, fmt.Errorf("dnstap: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return srv, nil
}

// dnstapHandler is what takes each client message of the intake: the
// flood pipeline counts every CLIENT_QUERY (its client, name and type;
// responses are not counted, so that a resolver sending both counts
// each query once), and Options.Dnstap, when set, sees every message.
// Nil when neither wants them.
func (d *Daemon) dnstapHandler() intake.Handler {
	consumer := d.opts.Dnstap
	var fp *flood.Producer
	if p := d.flood.Pipeline(); p != nil {
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

// runDnstap serves the intake's connections until ctx is done, then
// closes them; the returned channel is closed when it has.
func (d *Daemon) runDnstap(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if d.dnstap == nil {
		close(done)
		return done
	}
	d.dnstap.Serve()
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), dnstapStopTimeout)
		defer cancel()
		if err := d.dnstap.Shutdown(sctx); err != nil {
			d.log.Warn("dnstap intake stop", "err", err)
		}
	}()
	return done
}

// dnstapStatus is the intake in /status (nil without [dnstap]).
func (d *Daemon) dnstapStatus() *control.DnstapStatus {
	if d.dnstap == nil {
		return nil
	}
	st := &control.DnstapStatus{Open: d.dnstap.Open(), Senders: []control.DnstapSender{}}
	for _, a := range d.dnstap.Addrs() {
		st.Listeners = append(st.Listeners, a.String())
	}
	for _, s := range d.dnstap.Senders() {
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
