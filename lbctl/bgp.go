package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"lbdns/control"
)

// hostCmd is "lbctl host drain [--reason TEXT]" and "lbctl host enable":
// the host drain of the route announcer (-o json: the control.HostReply).
func hostCmd(fs *flag.FlagSet) action {
	reason := fs.String("reason", "", "drain: `text` saying why (stored and shown)")
	return func(e *env, args []string) error {
		if len(args) == 0 {
			return usageErrorf("missing subcommand (drain, enable)")
		}
		switch args[0] {
		case control.HostDrain, control.HostEnable:
		default:
			return usageErrorf("unknown host subcommand %q (want drain or enable)", args[0])
		}
		if len(args) > 1 {
			return usageErrorf("unexpected argument %q", args[1])
		}
		if args[0] == control.HostEnable && *reason != "" {
			return usageErrorf("--reason goes with host drain")
		}
		ctx, cancel := e.request()
		defer cancel()
		rep, err := e.client().SetHost(ctx, control.HostRequest{Action: args[0], Reason: *reason})
		if err != nil {
			return err
		}
		if e.json() {
			return e.writeJSON(rep)
		}
		msg := rep.Message
		if d := rep.Drain; d != nil && !d.WithdrawAt.IsZero() {
			msg += fmt.Sprintf(" (withdrawal at %s)", d.WithdrawAt.UTC().Format(time.RFC3339))
		}
		_, err = fmt.Fprintln(e.stdout, msg)
		return err
	}
}

// bgpCmd is "lbctl bgp status": the sessions and the prefixes, announced
// or not, with their MED, communities and why (-o json: the
// control.BGPStatus).
func bgpCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if len(args) == 0 || args[0] != "status" {
			return usageErrorf("want bgp status")
		}
		if len(args) > 1 {
			return usageErrorf("unexpected argument %q", args[1])
		}
		return statusSection(e, func(st *control.Status) *control.BGPStatus { return st.BGP },
			func(sw *statusWriter, st *control.Status) { sw.bgp(st.BGP) })
	}
}

// bgp writes the bgp section of a status.
func (sw *statusWriter) bgp(b *control.BGPStatus) {
	if b == nil {
		sw.printf("BGP: off (no [bgp] in the configuration)\n")
		return
	}
	sw.printf("BGP: router id %s, AS %d\n", b.RouterID, b.LocalAS)
	sw.bgpBanner(b)
	sw.printf("\n")
	tw := sw.table()
	fmt.Fprintf(tw, "PEER\tAS\tSTATE\tUPTIME\tLAST ERROR\tWHY\n")
	for _, p := range b.Peers {
		up := "-"
		if p.Since != nil {
			up = compact(sw.now.Sub(*p.Since))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Address, p.AS, p.State, up, dash(p.LastError), dash(p.Reason))
	}
	_ = tw.Flush()
	sw.printf("\n")
	tw = sw.table()
	fmt.Fprintf(tw, "PREFIX\tKIND\tNAME\tANNOUNCED\tMED\tCOMMUNITIES\tWHY\n")
	for _, p := range b.Prefixes {
		med, ann := "-", "no"
		if p.Announced {
			med, ann = fmt.Sprint(p.MED), "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Prefix, p.Kind, p.Name, ann, med, dash(strings.Join(p.Communities, " ")), p.Reason)
	}
	_ = tw.Flush()
}

// bgpBanner writes, in capitals, a host drain in force and the
// speaker's error, and a session down (lbctl status and lbctl bgp
// status).
func (sw *statusWriter) bgpBanner(b *control.BGPStatus) {
	if b == nil {
		return
	}
	if d := b.Drain; d != nil {
		what := "routes marked GRACEFUL_SHUTDOWN (65535:0), withdrawn at " + d.WithdrawAt.UTC().Format(time.RFC3339)
		if !sw.now.Before(d.WithdrawAt) {
			what = "routes withdrawn"
		}
		sw.printf("!! HOST DRAINED since %s by %s%s: %s (lbctl host enable announces again)\n", d.Set.UTC().Format(time.RFC3339), d.By, reasonText(d.Reason), what)
	}
	if b.Error != "" {
		sw.printf("!! BGP speaker error: %s\n", b.Error)
	}
	for _, p := range b.Peers {
		if p.State != "established" {
			why := p.LastError
			if p.Reason != "" {
				why = p.Reason // what keeps it down now beats how it went down
			}
			sw.printf("!! BGP SESSION DOWN with %s (AS %d): %s%s (lbctl bgp status)\n", p.Address, p.AS, p.State, reasonText(why))
		}
	}
}

// reasonText is ": REASON", or "" without one.
func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}
