package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
)

// gslbCmd shows the GSLB pools' members: per pool its combine rule and
// how many members are up, per member its address, state and reason, per
// monitor its state, last result, RTT, certificate days left and ICMP
// loss and socket. "status" is an alias of "members" that also shows the
// responder (listening on, serial, zones, names on their last resort) and
// the emergency switches and TTL raises in force; --pool keeps one pool. With
// -o json: the control.GSLBPool list, indented. "explain NAME" says how
// the responder answers NAME (see explainCmd); "off", "on" and "ttl" set
// the emergency intent (gslbSet).
func gslbCmd(fs *flag.FlagSet) action {
	pool := fs.String("pool", "", "members, status: only the GSLB pool `P`")
	name := fs.String("name", "", "off/on/ttl: only the GSLB name `N`")
	zone := fs.String("zone", "", "off/on/ttl: only the names of the GSLB zone `Z`")
	reason := fs.String("reason", "", "off/ttl: `text` saying why (required; stored and shown)")
	clear := fs.Bool("clear", false, "ttl: remove the TTL raise instead of setting one")
	ex := explainFlags(fs)
	return func(e *env, args []string) error {
		if len(args) == 0 {
			return usageErrorf("missing subcommand (members, status, explain, off, on, ttl)")
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		only := func(flags []string, sub string) error {
			for _, f := range flags {
				if set[f] {
					return usageErrorf("--%s is not for gslb %s", f, sub)
				}
			}
			return nil
		}
		explainOnly := []string{"client", "ecs", "type", "via", "peer", "forwarded-for", "proxy-source", "ip"}
		intentOnly := []string{"name", "zone", "reason", "clear"}
		switch args[0] {
		case "explain":
			if err := only(append([]string{"pool"}, intentOnly...), "explain"); err != nil {
				return err
			}
			if err := wantArgs(args, "subcommand", "NAME"); err != nil {
				return err
			}
			if err := ex.check(); err != nil {
				return err
			}
			return ex.run(e, args[1])
		case "off", "on", "ttl":
			if err := only(append([]string{"pool"}, explainOnly...), args[0]); err != nil {
				return err
			}
			return gslbSet(e, args, control.GSLBRequest{Action: args[0], Name: *name, Zone: *zone, Reason: *reason, Clear: *clear})
		case "members", "status":
		default:
			return usageErrorf("unknown gslb subcommand %q%s (want members, status, explain, off, on or ttl)", args[0],
				configs.Suggest(args[0], []string{"members", "status", "explain", "off", "on", "ttl"}))
		}
		if err := only(append(explainOnly, intentOnly...), args[0]); err != nil {
			return err
		}
		if len(args) > 1 {
			return usageErrorf("unexpected argument %q", args[1])
		}
		ctx, cancel := e.request()
		defer cancel()
		st, err := e.client().Status(ctx)
		if err != nil {
			return err
		}
		pools := st.GSLB
		if *pool != "" {
			pools = nil
			for _, p := range st.GSLB {
				if p.Name == *pool {
					pools = append(pools, p)
				}
			}
			if len(pools) == 0 {
				return control.Errorf(control.NotFound, "no GSLB pool %q%s", *pool, known(st.GSLB))
			}
		}
		if e.json() {
			if pools == nil {
				pools = []control.GSLBPool{}
			}
			return e.writeJSON(pools)
		}
		now := st.Generated
		if now.IsZero() {
			now = time.Now()
		}
		sw := &statusWriter{ew: &errWriter{w: e.stdout}, now: now}
		if args[0] == "status" {
			sw.gslbBanner(st.GSLBIntent)
			sw.gslbResponder(st.GSLBResponder)
			sw.gslbIntent(st.GSLBIntent)
		}
		if len(pools) == 0 {
			sw.printf("no GSLB pools configured\n")
		}
		for i, p := range pools {
			if i > 0 {
				sw.printf("\n")
			}
			sw.gslbPool(p)
		}
		return sw.ew.err
	}
}

// gslbSet sends a gslb off, on or ttl request and prints the daemon's
// one-line answer (-o json: the control.GSLBReply).
func gslbSet(e *env, args []string, req control.GSLBRequest) error {
	switch {
	case req.Name != "" && req.Zone != "":
		return usageErrorf("give --name or --zone, not both")
	case req.Action == control.GSLBTTL && req.Clear:
		if len(args) > 1 {
			return usageErrorf("gslb ttl --clear takes no SECONDS")
		}
	case req.Action == control.GSLBTTL:
		if len(args) != 2 {
			return usageErrorf("gslb ttl wants SECONDS (or --clear)")
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 || n > intent.MaxTTLRaise {
			return usageErrorf("gslb ttl: SECONDS must be a number of seconds from 1 to %d, not %q", intent.MaxTTLRaise, args[1])
		}
		req.Seconds = n
	case req.Clear:
		return usageErrorf("--clear goes with gslb ttl")
	case len(args) > 1:
		return usageErrorf("unexpected argument %q", args[1])
	}
	if (req.Action == control.GSLBOff || req.Action == control.GSLBTTL && !req.Clear) && strings.TrimSpace(req.Reason) == "" {
		return usageErrorf("--reason is required: operators reading the status must know why")
	}
	ctx, cancel := e.request()
	defer cancel()
	rep, err := e.client().SetGSLB(ctx, req)
	if err != nil {
		return err
	}
	if e.json() {
		return e.writeJSON(rep)
	}
	_, err = fmt.Fprintln(e.stdout, rep.Message)
	return err
}

// gslbBanner writes one loud line per kind of GSLB intent in force: the
// answers look no different, so the status must say it.
func (sw *statusWriter) gslbBanner(list []control.GSLBIntent) {
	var off, raised []string
	for _, g := range list {
		if g.Orphaned {
			continue
		}
		if g.Kind == control.GSLBOff {
			off = append(off, g.Scope)
		} else {
			raised = append(raised, fmt.Sprintf("%s to %ds", g.Scope, g.Seconds))
		}
	}
	if len(off) > 0 {
		sw.printf("!! GSLB EMERGENCY: intelligent resolution OFF for %s: static answers, ECS scope 0 (lbctl gslb on restores)\n", strings.Join(off, ", "))
	}
	if len(raised) > 0 {
		sw.printf("!! GSLB TTL RAISED: %s (lbctl gslb ttl --clear restores)\n", strings.Join(raised, ", "))
	}
}

// gslbLastResortBanner writes one loud line when any GSLB name answers
// by its last resort (lbctl status): fail-open is meant to be loud.
func (sw *statusWriter) gslbLastResortBanner(r *control.GSLBResponder) {
	if r == nil || len(r.LastResort) == 0 {
		return
	}
	names := make([]string, 0, len(r.LastResort))
	for _, lr := range r.LastResort {
		names = append(names, lastResortText(lr))
	}
	sw.printf("!! GSLB LAST RESORT: %s answering by their last resort (lbctl gslb status)\n", oneLine(strings.Join(names, ", "), 200))
}

// lastResortText says one name on its last resort: "www.g.test. A
// fail-open (warming)".
func lastResortText(lr control.GSLBLastResort) string {
	s := lr.Name + " " + lr.Type + " " + lr.LastResort
	if lr.Warming {
		s += " (warming)"
	}
	return s
}

// gslbResponder writes the responder's line (listening on, serial,
// zones), its build and listen errors, and one loud line per name
// answering by its last resort (lbctl gslb status).
func (sw *statusWriter) gslbResponder(r *control.GSLBResponder) {
	if r == nil {
		return
	}
	on := "OFF"
	if r.On {
		on = "listening on " + strings.Join(r.Listen, ", ")
	}
	built := "never built"
	if !r.LastBuild.IsZero() {
		built = "built " + sw.ago(r.LastBuild) + " ago"
	}
	sw.printf("gslb responder: %s; serial %d; zones %s; %s\n", on, r.Serial, dash(strings.Join(r.Zones, ", ")), built)
	if r.ListenError != "" {
		sw.printf("!! GSLB RESPONDER CANNOT LISTEN: %s\n", oneLine(r.ListenError, 200))
	}
	if r.LastBuildError != "" {
		sw.printf("!! GSLB SNAPSHOT BUILD FAILED (the last answers stay): %s\n", oneLine(r.LastBuildError, 200))
	}
	for _, f := range r.Fronts {
		sw.gslbFront(f)
	}
	for _, lr := range r.LastResort {
		why := "no pool of its policies has a member up"
		if lr.Warming {
			why = "members still warming"
		}
		sw.printf("!! LAST RESORT: %s %s answers %s since %s ago (%s)\n", lr.Name, lr.Type, lr.LastResort, sw.ago(lr.Since), why)
	}
	sw.printf("\n")
}

// certSoon is how close an expiry gslb status says in capitals.
const certSoon = 14 * 24 * time.Hour

// gslbFront writes one encrypted front's line (transport, addresses,
// paths, connections, certificate), and a loud line when its
// certificate has expired or expires within certSoon.
func (sw *statusWriter) gslbFront(f control.GSLBFront) {
	paths := ""
	if f.DoHPath != "" {
		paths = " (" + f.DoHPath
		if f.JSONPath != "" {
			paths += ", json " + f.JSONPath
		}
		paths += ")"
	}
	expiry := "-"
	left := f.CertNotAfter.Sub(sw.now)
	if !f.CertNotAfter.IsZero() {
		expiry = "expires in " + compact(left)
		if left <= 0 {
			expiry = "EXPIRED " + compact(-left) + " ago"
		}
	}
	sw.printf("gslb %s: listening on %s%s; %d/%d connections; certificate %s %s\n", f.Transport, strings.Join(f.Listen, ", "), paths,
		f.Connections, f.MaxConnections, dash(f.CertSubject), expiry)
	switch {
	case f.CertNotAfter.IsZero():
	case left <= 0:
		sw.printf("!! GSLB %s CERTIFICATE EXPIRED %s ago: %s\n", strings.ToUpper(f.Transport), compact(-left), f.CertSubject)
	case left < certSoon:
		sw.printf("!! GSLB %s CERTIFICATE EXPIRES in %s: %s\n", strings.ToUpper(f.Transport), compact(left), f.CertSubject)
	}
}

// gslbIntent writes the table of GSLB switches and raises with their
// audit (who, when, why) and the names each applies to.
func (sw *statusWriter) gslbIntent(list []control.GSLBIntent) {
	if len(list) == 0 {
		return
	}
	tw := sw.table()
	fmt.Fprintf(tw, "KIND\tSCOPE\tTTL\tNAMES\tREASON\tSET\tBY\n")
	for _, g := range list {
		ttl := "-"
		if g.Seconds > 0 {
			ttl = strconv.Itoa(g.Seconds) + "s"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s ago\t%s", g.Kind, g.Scope, ttl, dash(strings.Join(g.Names, ",")), dash(oneLine(g.Reason, 60)), sw.ago(g.Set), dash(g.By))
		if g.Orphaned {
			fmt.Fprintf(tw, "\tORPHANED")
		}
		fmt.Fprintf(tw, "\n")
	}
	tw.Flush()
	sw.printf("\n")
}

// known lists the configured GSLB pools for an error message.
func known(pools []control.GSLBPool) string {
	if len(pools) == 0 {
		return " (none configured)"
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return " (pools: " + strings.Join(names, ", ") + ")"
}

// gslbPool writes a GSLB pool's header, its member table and its monitor
// table (a row per member and monitor).
func (sw *statusWriter) gslbPool(p control.GSLBPool) {
	sw.printf("gslb pool %s (%s): %d/%d up\n", p.Name, combine(p), p.Up, p.Total)
	if len(p.Members) == 0 {
		sw.printf("  no members\n")
		return
	}
	tw := sw.table()
	fmt.Fprintf(tw, "  MEMBER\tADDRESS\tWEIGHT\tPRIORITY\tSTATE\tSINCE\tREASON\n")
	for _, m := range p.Members {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\n", m.Name, gslbAddress(m), m.Weight, m.Priority, m.State,
			sw.ago(m.Since), dash(oneLine(m.Reason, 60)))
	}
	tw.Flush()
	sw.printf("\n")
	tw = sw.table()
	cols := control.FactColumns()
	fmt.Fprintf(tw, "  MEMBER\tCHECK\tKIND\tSTATE\tSINCE\tLAST\tRTT")
	for _, c := range cols {
		fmt.Fprintf(tw, "\t%s", c.Header)
	}
	fmt.Fprintf(tw, "\n")
	for _, m := range p.Members {
		if len(m.Monitors) == 0 {
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t-\t-%s\n", m.Name, strings.Repeat("\t-", len(cols)))
		}
		for _, mo := range m.Monitors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s", m.Name, mo.Check, dash(mo.Kind), mo.State, sw.ago(mo.Since),
				dash(oneLine(mo.LastResult, 40)), monitorRTT(mo))
			for _, c := range cols {
				fmt.Fprintf(tw, "\t%s", factCell(mo, c))
			}
			fmt.Fprintf(tw, "\n")
		}
	}
	tw.Flush()
	sw.gslbVotes(p)
}

// gslbVotes writes, in a fleet, each member's fleet verdict and the
// votes it was made of, by prober and location ("b@dc2 down").
func (sw *statusWriter) gslbVotes(p control.GSLBPool) {
	if len(p.Members) == 0 || p.Members[0].Fleet == nil {
		return
	}
	sw.printf("\n")
	tw := sw.table()
	fmt.Fprintf(tw, "  MEMBER\tFLEET VERDICT\tFROM\tPROBERS\tVOTES\n")
	for _, m := range p.Members {
		f := m.Fleet
		verdict := f.Verdict
		if f.Held {
			verdict += " (held)"
		}
		var probers, votes []string
		for _, pr := range f.Probers {
			probers = append(probers, pr.Name+"@"+pr.Location)
		}
		for _, v := range f.Votes {
			say := "down"
			if v.Up {
				say = "up"
			}
			votes = append(votes, v.Prober+"@"+v.Location+" "+say)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.Name, verdict, f.Source, dash(strings.Join(probers, " ")),
			dash(strings.Join(votes, ", ")))
	}
	tw.Flush()
}

// combine is a pool's combine rule for people: "all" or "at least 2".
func combine(p control.GSLBPool) string {
	if p.Combine == "at_least" {
		return "at least " + strconv.Itoa(p.AtLeast)
	}
	return dash(p.Combine)
}

// gslbAddress is a member's answer address, with the probe address when
// it differs.
func gslbAddress(m control.GSLBMember) string {
	if m.ProbeAddress == "" || m.ProbeAddress == m.Address {
		return m.Address
	}
	return m.Address + " (probe " + m.ProbeAddress + ")"
}

// monitorRTT is the last probe's round-trip time, "-" before a probe.
func monitorRTT(mo control.GSLBMonitor) string {
	if mo.LastProbe.IsZero() && mo.RTTMillis == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", mo.RTTMillis)
}

// factCell is monitor mo's fact of column c with its unit, "-" when
// mo has none.
func factCell(mo control.GSLBMonitor, c control.FactColumn) string {
	f, ok := mo.Fact(c.Fact)
	if !ok || f.Format() == "" {
		return "-"
	}
	return f.Format() + c.Unit
}

// gslb writes the short GSLB section of lbctl status: per pool its up
// and total members and the members that are not up with their reason.
func (sw *statusWriter) gslb(pools []control.GSLBPool) {
	if len(pools) == 0 {
		return
	}
	sw.printf("\ngslb pools:\n")
	tw := sw.table()
	fmt.Fprintf(tw, "  POOL\tCOMBINE\tUP\tNOT UP\n")
	for _, p := range pools {
		var notUp []string
		for _, m := range p.Members {
			if m.State == "up" {
				continue
			}
			s := m.Name + " " + m.State
			if m.Reason != "" {
				s += " (" + oneLine(m.Reason, 50) + ")"
			}
			notUp = append(notUp, s)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%s\n", p.Name, combine(p), p.Up, p.Total, dash(strings.Join(notUp, ", ")))
	}
	tw.Flush()
}
