package main

import (
	"flag"
	"time"

	"lbdns/control"
)

// statusCmd prints the daemon's status: tables for people, or with -o json
// the control.Status document, indented.
func statusCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		ctx, cancel := e.request()
		defer cancel()
		st, err := e.client().Status(ctx)
		if err != nil {
			return err
		}
		if e.json() {
			return e.writeJSON(st)
		}
		return writeStatus(e.stdout, st)
	}
}

// statusSection prints one section of the daemon's status: with -o json
// the value json picks from it ({} when it is absent), else what write
// writes, ages relative to the snapshot's time.
func statusSection[T any](e *env, json func(*control.Status) *T, write func(*statusWriter, *control.Status)) error {
	ctx, cancel := e.request()
	defer cancel()
	st, err := e.client().Status(ctx)
	if err != nil {
		return err
	}
	if e.json() {
		if v := json(st); v != nil {
			return e.writeJSON(v)
		}
		return e.writeJSON(struct{}{})
	}
	now := st.Generated
	if now.IsZero() {
		now = time.Now()
	}
	sw := &statusWriter{ew: &errWriter{w: e.stdout}, now: now}
	write(sw, st)
	return sw.ew.err
}
