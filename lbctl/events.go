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

// eventPrinter writes events one line each, in columns of fixed width so
// that followed events line up with the ones printed before them.
type eventPrinter struct {
	w    io.Writer
	json bool
}

// eventPrinter returns the printer for e's output format.
func (e *env) eventPrinter() *eventPrinter { return &eventPrinter{w: e.stdout, json: e.json()} }

// eventLine is the layout of a table line: SEQ TIME KIND SUBJECT MESSAGE.
const eventLine = "%-6s  %-19s  %-8s  %-24s  %s\n"

// header writes the column titles (table format only).
func (p *eventPrinter) header() {
	if !p.json {
		fmt.Fprintf(p.w, eventLine, "SEQ", "TIME", "KIND", "SUBJECT", "MESSAGE")
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
	_, err := fmt.Fprintf(p.w, eventLine, fmt.Sprint(ev.Seq), stamp(ev.Time), ev.Kind, ev.Subject, msg)
	return err
}
