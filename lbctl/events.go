package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"lbdns/control"
)

// eventsCmd prints the daemon's recent events, newest last; -n keeps the
// last N, -f follows new ones until interrupted. With -o json each event
// is one JSON object on its own line.
func eventsCmd(fs *flag.FlagSet) action {
	follow := fs.Bool("f", false, "follow: print new events as they happen, until interrupted")
	n := fs.Int("n", 0, "print only the last `N` events (0: all the daemon keeps)")
	return func(e *env, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		if *n < 0 {
			return usageErrorf("-n must not be negative, not %d", *n)
		}
		ctx, cancel := e.request()
		rep, err := e.client().Events(ctx, 0)
		cancel()
		if err != nil {
			return err
		}
		evs := rep.Events
		if *n > 0 && len(evs) > *n {
			evs = evs[len(evs)-*n:]
		}
		pr := e.eventPrinter()
		pr.fit(evs)
		if rep.Missed > 0 && !e.json() {
			fmt.Fprintf(e.stdout, "(%d older events are no longer kept; lbdnsd's log has them)\n", rep.Missed)
		}
		pr.header()
		for _, ev := range evs {
			if err := pr.print(ev); err != nil {
				return err
			}
		}
		if !*follow {
			return nil
		}
		// No -timeout: the stream lasts until the operator interrupts it
		// (run's context is cancelled; Follow then returns nil).
		return e.client().Follow(e.ctx, rep.Next, pr.print)
	}
}

// eventPrinter writes events one line each, in columns whose widths are
// fixed once (fit), so that followed events line up with the ones printed
// before them.
type eventPrinter struct {
	w    io.Writer
	json bool
	// seq, kind and subject are the column widths.
	seq, kind, subject int
}

// eventPrinter returns the printer for e's output format.
func (e *env) eventPrinter() *eventPrinter {
	p := &eventPrinter{w: e.stdout, json: e.json(), seq: 6, subject: 24}
	for _, k := range control.EventKinds() {
		p.kind = max(p.kind, len(k))
	}
	return p
}

// fit widens the columns to the longest sequence number and subject of
// evs (the kinds' width is the longest kind's already).
func (p *eventPrinter) fit(evs []control.Event) {
	for _, ev := range evs {
		p.seq = max(p.seq, len(fmt.Sprint(ev.Seq)))
		p.kind = max(p.kind, len(ev.Kind))
		p.subject = max(p.subject, len(ev.Subject))
	}
}

// line writes one table line: SEQ TIME KIND SUBJECT MESSAGE.
func (p *eventPrinter) line(seq, time, kind, subject, msg string) error {
	_, err := fmt.Fprintf(p.w, "%-*s  %-19s  %-*s  %-*s  %s\n", p.seq, seq, time, p.kind, kind, p.subject, subject, msg)
	return err
}

// header writes the column titles (table format only).
func (p *eventPrinter) header() {
	if !p.json {
		p.line("SEQ", "TIME", "KIND", "SUBJECT", "MESSAGE")
	}
}

// print writes one event; a failure's message starts with "ERROR:".
func (p *eventPrinter) print(ev control.Event) error {
	if p.json {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	msg := ev.Message
	if ev.Error {
		msg = "ERROR: " + msg
	}
	return p.line(fmt.Sprint(ev.Seq), stamp(ev.Time), ev.Kind, ev.Subject, msg)
}
