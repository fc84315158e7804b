package main

import (
	"flag"
	"fmt"

	"lbdns/control"
)

// overrideCmd returns the setup of drain, disable or enable: one RESOLVER
// argument, --pool or --vip to scope it, --reason to explain it.
func overrideCmd(act string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		pool := fs.String("pool", "", "only in this `pool`")
		vip := fs.String("vip", "", "only for this `VIP`")
		reason := fs.String("reason", "", "`text` saying why (stored and shown with the override)")
		return func(e *env, args []string) error {
			if err := wantArgs(args, "RESOLVER"); err != nil {
				return err
			}
			if *pool != "" && *vip != "" {
				return usageErrorf("give --pool or --vip, not both")
			}
			req := control.OverrideRequest{Action: act, Resolver: args[0], Pool: *pool, VIP: *vip, Reason: *reason}
			ctx, cancel := e.request()
			defer cancel()
			rep, err := e.client().SetOverride(ctx, req)
			if err != nil {
				return err
			}
			if e.json() {
				return e.writeJSON(rep)
			}
			_, err = fmt.Fprintln(e.stdout, rep.Message)
			return err
		}
	}
}
