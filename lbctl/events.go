package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/control"
)

// eventsSummary is lbctl events' one-line help: the order and the
// filters.
var eventsSummary = "show recent events, oldest first: the newest at the bottom, next to the prompt, as tail and journalctl print them, " +
	"so that -f carries on in the same order (the status page lists them in this order too); " +
	"by default the events for people (verdicts, operator actions, failures), each run of routine work (IPVS operations, the start line, " +
	"back ends up at their first checks) folded into one line; --all lists every event, --kind keeps some kinds"

// eventsCmd prints the daemon's recent events, oldest first (newest
// last); -n keeps the last N lines, -f follows new ones until
// interrupted, --kind keeps some kinds, --all lists routine work one
// event a line instead of folding each run into one line. With -o json
// each event is one JSON object on its own line (folded runs are left
// out: --all has them).
func eventsCmd(fs *flag.FlagSet) action {
	follow := fs.Bool("f", false, "follow: print new events as they happen, until interrupted")
	n := fs.Int("n", 0, "print only the last `N` lines (a folded run of routine work is one; 0: all the daemon keeps)")
	kinds := fs.String("kind", "", "keep the events of the `K[,K...]` kinds only (comma-separated): "+strings.Join(control.EventKinds(), ", "))
	all := fs.Bool("all", false, "list every event, routine work (IPVS operations, the start line, back ends up at their first checks) one by one")
	return func(e *env, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		if *n < 0 {
			return usageErrorf("-n must not be negative, not %d", *n)
		}
		f := control.EventFilter{Kinds: control.SplitKinds(*kinds), All: *all}
		if bad := control.UnknownEventKinds(f.Kinds); len(bad) > 0 {
			return usageErrorf("--kind: unknown event kind %q%s (kinds: %s)", bad[0],
				configs.Suggest(bad[0], control.EventKinds()), strings.Join(control.EventKinds(), ", "))
		}
		ctx, cancel := e.request()
		rep, err := e.client().Events(ctx, 0)
		cancel()
		if err != nil {
			return err
		}
		rows := f.Rows(rep.Events)
		if *n > 0 && len(rows) > *n {
			rows = rows[len(rows)-*n:]
		}
		pr := e.eventPrinter()
		pr.fit(rows)
		if rep.Missed > 0 && !e.json() {
			fmt.Fprintf(e.stdout, "(%d older events are no longer kept; lbdnsd's log has them)\n", rep.Missed)
		}
		pr.header()
		for _, r := range rows {
			if err := pr.row(r); err != nil {
				return err
			}
		}
		if !*follow {
			return nil
		}
		// No -timeout: the stream lasts until the operator interrupts it
		// (run's context is cancelled; Follow then returns nil). Routine
		// work is folded as before: a run is printed as one line when the
		// next event for people comes.
		var run []control.Event
		return e.client().Follow(e.ctx, rep.Next, func(ev control.Event) error {
			if f.Folds(ev) {
				run = append(run, ev)
				return nil
			}
			if !f.Keep(ev) {
				return nil
			}
			if len(run) > 0 {
				if err := pr.row(control.EventRow{Routine: run}); err != nil {
					return err
				}
				run = nil
			}
			return pr.print(ev)
		})
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

// fit widens the columns to the longest sequence number (or range of a
// folded run) and subject of rows (the kinds' width is the longest
// kind's already).
func (p *eventPrinter) fit(rows []control.EventRow) {
	for _, r := range rows {
		if len(r.Routine) > 0 {
			p.seq = max(p.seq, len(runSeq(r.Routine)))
			continue
		}
		ev := r.Event
		p.seq = max(p.seq, len(fmt.Sprint(ev.Seq)))
		p.kind = max(p.kind, len(ev.Kind))
		p.subject = max(p.subject, len(ev.Subject))
	}
}

// runSeq is the sequence numbers of a folded run: "12-23".
func runSeq(run []control.Event) string {
	return fmt.Sprintf("%d-%d", run[0].Seq, run[len(run)-1].Seq)
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

// row writes one row: an event, or a folded run of routine work in one
// line (table format only: JSON has events only).
func (p *eventPrinter) row(r control.EventRow) error {
	if len(r.Routine) == 0 {
		return p.print(r.Event)
	}
	if p.json {
		return nil
	}
	first, last := r.Routine[0], r.Routine[len(r.Routine)-1]
	return p.line(runSeq(r.Routine), stamp(first.Time), "routine", "-",
		fmt.Sprintf("%s %s–%s (--all lists them)", control.RoutineText(r.Routine), clock(first.Time), clock(last.Time)))
}

// clock is t's local time of day.
func clock(t time.Time) string { return t.Local().Format("15:04:05") }

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
