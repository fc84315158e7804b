package main

import (
	"errors"
	"flag"
	"fmt"

	"lbdns/control"
)

// reloadCmd asks the daemon to load its configuration file again. A
// rejected file prints every problem and exits 1.
func reloadCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		ctx, cancel := e.request()
		defer cancel()
		rep, err := e.client().Reload(ctx)
		var ce *control.Error
		if errors.As(err, &ce) && ce.Kind == control.InvalidConfig && len(ce.Problems) > 0 && !e.json() {
			fmt.Fprintln(e.stderr, "reload rejected; running config unchanged:")
			for _, p := range ce.Problems {
				fmt.Fprintln(e.stderr, p.Text)
			}
			return &exitError{code: exitRefused}
		}
		if err != nil {
			return err
		}
		if e.json() {
			return e.writeJSON(rep)
		}
		_, err = fmt.Fprintf(e.stdout, "config reloaded: %s\n", rep.Summary)
		return err
	}
}
