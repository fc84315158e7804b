package main

import (
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"lbdns/control"
)

// writeStatus writes st as tables: the daemon, the VIPs, each pool with its
// members, a GSLB summary, the overrides and a prefetch summary. Ages are relative to
// st.Generated (the snapshot's time).
func writeStatus(w io.Writer, st *control.Status) error {
	now := st.Generated
	if now.IsZero() {
		now = time.Now()
	}
	sw := &statusWriter{ew: &errWriter{w: w}, now: now}
	sw.summary(st)
	sw.gslbBanner(st.GSLBIntent)
	sw.gslbLastResortBanner(st.GSLBResponder)
	sw.bgpBanner(st.BGP)     // bgp.go
	sw.floodBanner(st.Flood) // top.go
	sw.etcdBanner(st.Fleet)  // fleet.go
	sw.daemon(st.Daemon)
	sw.vips(st.VIPs, st.Daemon.DryRun)
	if len(st.Pools) == 0 {
		sw.printf("\nno pools\n")
	}
	for _, p := range st.Pools {
		sw.pool(p)
	}
	sw.gslb(st.GSLB)
	sw.overrides(st.Overrides)
	sw.clients(st.Clients, false) // clients.go
	sw.prefetch(st.Prefetch)
	return sw.ew.err
}

// summary prints the status's incidents first, worst first, each in one
// line (with what to do and the runbook section on a second), or the
// one line that says everything is as configured. A daemon that
// predates the summary sends none: nothing is printed.
func (sw *statusWriter) summary(st *control.Status) {
	if st.Summary == nil {
		return
	}
	if len(st.Summary) == 0 {
		sw.printf("OK  %s\n\n", st.HealthyLine())
		return
	}
	for _, in := range st.Summary {
		line := strings.ToUpper(in.Severity) + "  " + in.Summary
		if in.Effect != "" {
			line += " — " + in.Effect
		}
		if !in.Since.IsZero() {
			line += " (since " + in.Since.UTC().Format("2006-01-02 15:04:05 UTC") + ", " + sw.ago(in.Since) + " ago)"
		}
		sw.printf("%s\n", line)
		var next []string
		if in.Action != "" {
			next = append(next, "do: "+in.Action)
		}
		if in.Runbook != "" {
			next = append(next, "runbook: "+in.Runbook)
		}
		if len(next) > 0 {
			sw.printf("      %s\n", strings.Join(next, "; "))
		}
	}
	sw.printf("\n")
}

// errWriter keeps the first write error and skips writes after it.
type errWriter struct {
	w   io.Writer
	err error
}

// Write writes p unless an earlier write failed.
func (ew *errWriter) Write(p []byte) (int, error) {
	if ew.err != nil {
		return 0, ew.err
	}
	n, err := ew.w.Write(p)
	if err != nil {
		ew.err = fmt.Errorf("write status: %w", err)
	}
	return n, err
}

// statusWriter writes the sections of the status tables.
type statusWriter struct {
	ew  *errWriter
	now time.Time
}

// printf writes one formatted piece of text.
func (sw *statusWriter) printf(format string, args ...any) {
	fmt.Fprintf(sw.ew, format, args...)
}

// table returns a tabwriter over the output; rows are tab-separated cells.
func (sw *statusWriter) table() *tabwriter.Writer {
	return tabwriter.NewWriter(sw.ew, 0, 8, 2, ' ', 0)
}

// ago formats how long before the snapshot t was, "-" when t is zero.
func (sw *statusWriter) ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return compact(sw.now.Sub(t))
}

// daemon writes the daemon line and, in capitals, the states an operator
// must not miss: dry run, warming up, a failed reload.
func (sw *statusWriter) daemon(d control.Daemon) {
	ipvs := fmt.Sprintf("ipvs %d ops, %d errors", d.IPVSOps, d.IPVSErrors)
	if d.DryRun {
		ipvs = fmt.Sprintf("ipvs %d ops computed, not applied", d.IPVSOps)
	}
	if d.Version != "" {
		ipvs += ", version " + d.Version
	}
	sw.printf("lbdnsd: config %s, up since %s (%s), last reload %s (%s ago), %s\n",
		dash(d.Config), stamp(d.Started), sw.ago(d.Started), stamp(d.LastReload), sw.ago(d.LastReload), ipvs)
	if d.DryRun {
		sw.printf("DRY RUN: the IPVS table is computed but NOT applied\n")
	}
	if !d.Warm {
		sw.printf("WARMING UP: not every back end has a verdict yet; the IPVS table is left as it is\n")
	}
	if d.LastReloadError != "" {
		sw.printf("LAST RELOAD FAILED (running config unchanged): %s\n", d.LastReloadError)
	}
}

// vips writes the VIP table.
func (sw *statusWriter) vips(vips []control.VIP, dryRun bool) {
	sw.printf("\n")
	if len(vips) == 0 {
		sw.printf("no VIPs configured\n")
		return
	}
	tw := sw.table()
	fmt.Fprintf(tw, "NAME\tADDRESS\tPOOL\tSERVICES\tSERVING\n")
	var down []control.VIP
	for _, v := range vips {
		serving := "yes"
		switch {
		case v.Serving == nil, dryRun:
			serving = "-" // the warm-up is not over, or nothing is applied
		case !*v.Serving:
			serving, down = "NO", append(down, v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Address, v.Pool, services(v.Services), serving)
	}
	tw.Flush()
	for _, v := range down {
		sw.printf("VIP %s: %s\n", v.Name, v.ServingReason)
	}
}

// services formats a VIP's services as "udp/53 tcp/53".
func services(ss []control.Service) string {
	if len(ss) == 0 {
		return "-"
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		port := s.Address
		if _, p, err := net.SplitHostPort(s.Address); err == nil {
			port = p
		}
		out[i] = s.Proto + "/" + port
	}
	return strings.Join(out, " ")
}

// pool writes a pool's header, its FAIL-OPEN warning, detail, vendor
// counts and member table.
func (sw *statusWriter) pool(p control.Pool) {
	sw.printf("\npool %s (check %s): %s, %d of %d up (%d enabled, min healthy %d)\n",
		p.Name, p.Check, p.Diagnosis, p.Healthy, p.Total, p.Enabled, p.MinHealthy)
	if p.FailOpen {
		sw.failOpen(p.Members)
	}
	if p.Detail != "" {
		sw.printf("  %s\n", p.Detail)
	}
	if len(p.Vendors) > 0 {
		vs := make([]string, len(p.Vendors))
		for i, v := range p.Vendors {
			vs[i] = fmt.Sprintf("%s %d/%d", v.Vendor, v.Healthy, v.Total)
		}
		sw.printf("  %s\n", strings.Join(vs, "  "))
	}
	if len(p.Members) == 0 {
		sw.printf("  no members\n")
		return
	}
	tw := sw.table()
	fmt.Fprintf(tw, "  RESOLVER\tADDRESS\tVENDOR\tIDENTIFIED\tSTATE\tSINCE\tLAST\tRTT\tFLAPS\tOVERRIDE\tWHY\tWEIGHT\tCONNS\tPPS\n")
	for _, m := range p.Members {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			m.Resolver, m.Address, m.Vendor, identified(m), state(m), sw.ago(m.Since), sw.last(m),
			rtt(m), m.Flaps, override(m.Override, m.OverrideReason), dash(m.Why), weight(m), conns(m.Stats), pps(m.Stats))
	}
	tw.Flush()
}

// failOpen writes the FAIL-OPEN warning of a pool failing open: which
// failing members it holds in traffic (its last good set, or every
// enabled member when it has none) and which it keeps out because they
// were failing before the collapse, from the members' reasons.
func (sw *statusWriter) failOpen(members []control.Member) {
	var held, out, all []string
	for _, m := range members {
		switch m.Why {
		case control.WhyHeldFailOpen:
			held = append(held, m.Resolver)
		case control.WhyOutFailOpen:
			out = append(out, m.Resolver)
		case control.WhyFailOpenAll:
			all = append(all, m.Resolver)
		}
	}
	switch {
	case len(all) > 0:
		sw.printf("FAIL-OPEN: no last good set (cold start, or the pool changed): every enabled member kept in traffic, failing ones too: %s\n",
			strings.Join(all, ", "))
	case len(held) > 0:
		sw.printf("FAIL-OPEN: last good set held in traffic although failing: %s\n", strings.Join(held, ", "))
	default:
		sw.printf("FAIL-OPEN: the members in traffic before the collapse (last good set) are held; those failing before it stay out\n")
	}
	if len(out) > 0 {
		sw.printf("  kept out, already failing before the collapse: %s\n", strings.Join(out, ", "))
	}
}

// identified is the vendor the resolver's identity names, marked "!" when
// it is not the declared one.
func identified(m control.Member) string {
	switch m.IdentifiedVendor {
	case "":
		return "-"
	case m.Vendor:
		return m.IdentifiedVendor
	}
	return m.IdentifiedVendor + "!"
}

// state is the member's health state, marked when its facts are stale.
func state(m control.Member) string {
	if !m.Fresh && m.State != "unknown" {
		return m.State + " (stale)"
	}
	return m.State
}

// last is the last probe's result, with its age when stale.
func (sw *statusWriter) last(m control.Member) string {
	if m.LastResult == "" {
		return "-"
	}
	r := oneLine(m.LastResult, 40)
	if !m.Fresh && !m.LastProbe.IsZero() {
		r += " (" + sw.ago(m.LastProbe) + " ago)"
	}
	return r
}

// rtt is the last probe's round-trip time.
func rtt(m control.Member) string {
	if m.LastProbe.IsZero() && m.RTTMillis == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", m.RTTMillis)
}

// override is "drain (reason)", "disable", or "-" for none.
func override(action, reason string) string {
	switch {
	case action == "" || action == "none":
		return "-"
	case reason == "":
		return action
	}
	return action + " (" + oneLine(reason, 40) + ")"
}

// weight is the member's IPVS weight, "-" when it is not in traffic.
func weight(m control.Member) string {
	if !m.InTraffic {
		return "-"
	}
	return fmt.Sprint(m.Weight)
}

// conns is the member's active plus inactive connections, "-" without
// stats.
func conns(s *control.DestStats) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprint(uint64(s.ActiveConns) + uint64(s.InactiveConns))
}

// pps is the kernel's estimate of packets per second to the member, "-"
// without stats.
func pps(s *control.DestStats) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprint(s.PPSIn)
}

// overrides writes the override table, when there are any.
func (sw *statusWriter) overrides(ovs []control.Override) {
	if len(ovs) == 0 {
		return
	}
	sw.printf("\noverrides:\n")
	tw := sw.table()
	fmt.Fprintf(tw, "  RESOLVER\tSCOPE\tACTION\tREASON\tSET\tBY\n")
	for _, o := range ovs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s ago\t%s", o.Resolver, control.Scope(o.Pool, o.VIP), o.Action, dash(oneLine(o.Reason, 60)), sw.ago(o.Set), dash(o.By))
		if o.Orphaned {
			fmt.Fprintf(tw, "\tORPHANED")
		}
		fmt.Fprintf(tw, "\n")
	}
	tw.Flush()
}

// prefetch writes the prefetch summary line, when there are entries.
func (sw *statusWriter) prefetch(entries []control.PrefetchEntry) {
	if len(entries) == 0 {
		return
	}
	count := map[string]int{}
	for _, pe := range entries {
		count[pe.State]++
	}
	sw.printf("\nprefetch: %d entries, failing %d", len(entries), count["failing"])
	if n := count["expired"]; n > 0 {
		sw.printf(", expired %d (not refreshed in their window: lbctl prefetch)", n)
	}
	if n := count["parked"]; n > 0 {
		sw.printf(", parked %d", n)
	}
	sw.printf("\n")
}
