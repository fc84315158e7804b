package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"lbdns/control"
	"lbdns/intent"
)

// clientActionCmd returns the setup of "lbctl block CLIENT --for D
// --reason R [--force]" and "lbctl limit CLIENT [--rate N] --for D
// --reason R" (-o json: the control.ClientReply).
func clientActionCmd(act string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		dur := fs.Duration("for", 0, "how long the action lasts, such as 10m (required; at most a week); it ends on its own")
		reason := fs.String("reason", "", "`text` saying why (required; stored and shown)")
		var rate *int
		var force *bool
		if act == control.ClientLimit {
			rate = fs.Int("rate", 0, "packets per second per source address (default: the configured actions.default_limit_qps)")
		} else {
			force = fs.Bool("force", false, "block a client of an actions.shared prefix (a NAT gateway or a shared resolver may be there)")
		}
		return func(e *env, args []string) error {
			if err := wantArgs(args, "CLIENT"); err != nil {
				return err
			}
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			switch {
			case !set["for"]:
				return usageErrorf("--for is required: how long the %s lasts, such as 10m", act)
			case *dur <= 0:
				return usageErrorf("--for %v: want a positive duration, such as 10m", *dur)
			case *dur > intent.MaxClientFor:
				return usageErrorf("--for %v: at most %v (a week); set it again when it ends", *dur, intent.MaxClientFor)
			case *dur%time.Second != 0:
				return usageErrorf("--for %v: give whole seconds", *dur)
			case strings.TrimSpace(*reason) == "":
				return usageErrorf("--reason is required: operators reading the status must know why")
			}
			req := control.ClientRequest{Action: act, Client: args[0], ForSeconds: int64(*dur / time.Second), Reason: *reason}
			if rate != nil {
				if set["rate"] && (*rate < 1 || *rate > intent.MaxClientRate) {
					return usageErrorf("--rate %d: want 1 to %d packets per second (leave --rate out for actions.default_limit_qps)", *rate, intent.MaxClientRate)
				}
				req.Rate = *rate
			}
			if force != nil {
				req.Force = *force
			}
			return sendClient(e, req)
		}
	}
}

// unblockCmd is "lbctl unblock CLIENT": removes a block or a limit.
func unblockCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if err := wantArgs(args, "CLIENT"); err != nil {
			return err
		}
		return sendClient(e, control.ClientRequest{Action: control.ClientUnblock, Client: args[0]})
	}
}

// sendClient sends req and prints the reply's message.
func sendClient(e *env, req control.ClientRequest) error {
	ctx, cancel := e.request()
	defer cancel()
	rep, err := e.client().SetClient(ctx, req)
	if err != nil {
		return err
	}
	if e.json() {
		return e.writeJSON(rep)
	}
	msg := rep.Message
	if c := rep.Clients; c != nil && !c.Enforced && c.Error != "" {
		// First: what the kernel does is not what the message says.
		msg = "NOT ENFORCED: the kernel's table was not changed (" + c.Error + "); the intent below is stored but not in force\n" + msg
	}
	_, err = fmt.Fprintln(e.stdout, msg)
	return err
}

// clientsCmd is "lbctl clients": the client actions in force (-o json:
// the control.ClientsStatus).
func clientsCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected argument %q", args[0])
		}
		return statusSection(e, func(st *control.Status) *control.ClientsStatus { return st.Clients },
			func(sw *statusWriter, st *control.Status) { sw.clients(st.Clients, true) })
	}
}

// clients writes the client actions: the table and whether it is
// enforced, then one line per action (none: a line saying so when all
// is set, else nothing).
func (sw *statusWriter) clients(c *control.ClientsStatus, all bool) {
	if c == nil || len(c.Entries) == 0 && !all {
		if c != nil && !c.Enforced && c.Error != "" {
			sw.printf("\nCLIENT ACTIONS NOT ENFORCED: %s\n", c.Error)
		}
		return
	}
	enf := "enforced"
	if !c.Enforced {
		enf = "NOT ENFORCED"
	}
	if !all {
		sw.printf("\n") // a section of lbctl status
	}
	live, unremoved := 0, 0
	for _, a := range c.Entries {
		if a.Unremoved {
			unremoved++
		} else {
			live++
		}
	}
	sw.printf("client actions: %d of at most %d, table inet %s, %s", live, c.MaxEntries, c.Table, enf)
	if c.Error != "" {
		sw.printf(": %s", c.Error)
	}
	sw.printf("\n")
	if unremoved > 0 {
		sw.printf("%d unblocked but NOT REMOVED from the kernel: it may still drop or limit their packets until each one's UNTIL\n", unremoved)
	}
	if len(c.Entries) == 0 {
		return
	}
	tw := sw.table()
	fmt.Fprintf(tw, "  CLIENT\tACTION\tRATE\tLEFT\tUNTIL\tREASON\tSET\tBY\tENFORCED\n")
	for _, a := range c.Entries {
		rate := "-"
		if a.Action == control.ClientLimit {
			rate = fmt.Sprintf("%d/s", a.Rate)
		}
		yes := "yes"
		switch {
		case a.Unremoved:
			yes = "NOT REMOVED"
		case !a.Enforced:
			yes = "NO"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\t%s\n", a.Client, a.Action, rate, compact(a.Until.Sub(sw.now)),
			a.Until.UTC().Format(time.RFC3339), dash(oneLine(a.Reason, 60)), sw.ago(a.Set), dash(a.By), yes)
	}
	tw.Flush()
}
