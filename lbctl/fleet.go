package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"lbdns/control"
)

// fleetCmd shows the fleet of LB hosts as the daemon's node reads it
// from etcd ("status", the only subcommand): every node whose heartbeat
// is alive, with its heartbeat's age, location, cluster, configuration
// hash, the intent revision it applied (and the one in force when it is
// behind), its SOA serial and version; the odd one out is marked with
// "!" and why. With -o json: the control.FleetStatus, indented.
func fleetCmd(*flag.FlagSet) action {
	return func(e *env, args []string) error {
		if len(args) == 0 {
			return usageErrorf("missing subcommand (status)")
		}
		if args[0] != "status" {
			return usageErrorf("unknown fleet subcommand %q (want status)", args[0])
		}
		if err := wantArgs(args, "subcommand"); err != nil {
			return err
		}
		ctx, cancel := e.request()
		defer cancel()
		st, err := e.client().Fleet(ctx)
		if err != nil {
			return err
		}
		if e.json() {
			return e.writeJSON(st)
		}
		return writeFleet(e, st)
	}
}

// writeVotes says where the GSLB answers take the members' states from,
// loudly when that is not the fleet, and this node's part in the votes.
func writeVotes(ew *errWriter, st *control.FleetStatus) {
	switch st.Verdicts {
	case "":
		return
	case "fleet":
		fmt.Fprintf(ew, "GSLB verdicts: the fleet's (%d live probers: %s; %d per member)\n", len(st.Probers), dash(strings.Join(st.Probers, " ")), st.ProbersPerMember)
	default:
		fmt.Fprintf(ew, "!! GSLB VERDICTS FROM THIS NODE'S OWN PROBES: %s\n", st.VerdictsWhy)
	}
	if st.Withdrawn {
		fmt.Fprintf(ew, "!! VOTES WITHDRAWN: most of this node's %d canaries fail (a prober cut off from the members is no down vote)\n", st.Canaries)
	}
	fmt.Fprintf(ew, "this node probes %d of %d GSLB members and %d canaries; %d vote writes\n", st.ProbedMembers, st.Members, st.Canaries, st.VoteWrites)
	writeCanaries(ew, st)
}

// writeCanaries says which canary this node advertises, which canaries
// it leaves out as its own, and, loudly, what is wrong with the fleet's
// canaries.
func writeCanaries(ew *errWriter, st *control.FleetStatus) {
	if st.CanaryAddress != "" {
		fmt.Fprintf(ew, "this node's canary (probed by the others): %s, from %s\n", st.CanaryAddress, st.CanaryFrom)
	} else if st.CanaryFrom != "" {
		fmt.Fprintf(ew, "!! THIS NODE ADVERTISES NO CANARY: %s\n", st.CanaryFrom)
	}
	if len(st.CanariesOwn) > 0 {
		fmt.Fprintf(ew, "canaries left out as this node itself: %s\n", strings.Join(st.CanariesOwn, " "))
	}
	for _, w := range st.CanaryWarnings {
		fmt.Fprintf(ew, "!! CANARIES: %s\n", w)
	}
}

func writeFleet(e *env, st *control.FleetStatus) error {
	ew := &errWriter{w: e.stdout}
	if !st.On {
		fmt.Fprintln(ew, "not in a fleet: the configuration has no [fleet] (this host's intent is its own)")
		return ew.err
	}
	hb := "alive"
	if !st.Heartbeat {
		hb = "NOT alive (etcd unreachable? this node is missing from the fleet view)"
	}
	fmt.Fprintf(ew, "node %s (location %s, cluster %s), heartbeat %s\n", st.Node, st.Location, dash(st.Cluster), hb)
	if et := st.Etcd; et != nil {
		if et.Reachable {
			fmt.Fprintf(ew, "etcd reachable (since %s), intent revision %d from %s\n", stamp(et.Since), et.IntentRevision, et.IntentSource)
		} else {
			fmt.Fprintf(ew, "ETCD UNREACHABLE since %s: serving the intent applied last (revision %d, from %s); intent changes are refused (exit 5) until it is back: %s\n",
				stamp(et.Since), et.IntentRevision, et.IntentSource, et.Error)
		}
	}
	writeVotes(ew, st)
	if st.Error != "" {
		fmt.Fprintf(ew, "the fleet view cannot be read: %s\n", st.Error)
		return ew.err
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tNODE\tLOCATION\tCLUSTER\tAGE\tCONFIG\tINTENT\tSERIAL\tVERSION\tSTARTED\tODD")
	odd := 0
	for _, n := range st.Nodes {
		mark, why := "", "-"
		if len(n.Odd) > 0 {
			mark, why = "!", strings.Join(n.Odd, "; ")
			odd++
		}
		if n.Withdrawn {
			why = strings.TrimPrefix(why+"; votes withdrawn (canaries fail)", "-; ")
		}
		if n.Drained {
			why = strings.TrimPrefix(why+"; host DRAINED (announcements going away)", "-; ")
		}
		rev := fmt.Sprint(n.IntentRevision)
		if n.IntentRevision != n.CurrentRevision {
			rev = fmt.Sprintf("%d/%d", n.IntentRevision, n.CurrentRevision)
		}
		age := compact(time.Duration(n.AgeSeconds * float64(time.Second)))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", mark, n.Name, n.Location, dash(n.Cluster), age, dash(n.ConfigHash), rev, n.Serial, dash(n.Version), stamp(n.Started), why)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		return fmt.Errorf("write fleet: %w", err)
	}
	switch {
	case len(st.Nodes) == 0:
		fmt.Fprintln(ew, "no node has a live heartbeat")
	case odd == 0:
		fmt.Fprintf(ew, "%d nodes agree\n", len(st.Nodes))
	default:
		fmt.Fprintf(ew, "%d of %d nodes differ (marked !)\n", odd, len(st.Nodes))
	}
	return ew.err
}

// etcdBanner says, first, that the daemon cannot reach the fleet's etcd
// (nothing without [fleet] or while etcd is reachable).
func (sw *statusWriter) etcdBanner(f *control.FleetEtcd) {
	if f == nil || f.Reachable {
		return
	}
	sw.printf("FLEET: ETCD UNREACHABLE since %s (%s ago): serving the intent applied last (revision %d, from %s); intent changes are refused (exit 5) until it is back\n",
		stamp(f.Since), sw.ago(f.Since), f.IntentRevision, f.IntentSource)
}
