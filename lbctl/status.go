package main

import "flag"

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
