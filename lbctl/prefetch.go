package main

import (
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"lbdns/control"
)

// prefetchCmd lists the cache-refresh entries: every kept-warm name and
// type at every resolver (and ECS partition), with the last refresh, the
// remaining TTL, the next run, the times it was found expired and the
// gaps after expiry. --resolver and --name filter the list.
func prefetchCmd(fs *flag.FlagSet) action {
	resolver := fs.String("resolver", "", "only entries of this `resolver`")
	name := fs.String("name", "", "only entries of this domain `name` (as configured, with the final dot)")
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
		entries := make([]control.PrefetchEntry, 0, len(st.Prefetch))
		for _, pe := range st.Prefetch {
			if (*resolver == "" || pe.Resolver == *resolver) && (*name == "" || pe.Name == *name) {
				entries = append(entries, pe)
			}
		}
		if e.json() {
			return e.writeJSON(entries)
		}
		return writePrefetch(e, st, entries)
	}
}

func writePrefetch(e *env, st *control.Status, entries []control.PrefetchEntry) error {
	ew := &errWriter{w: e.stdout}
	if len(st.Prefetch) == 0 {
		fmt.Fprintln(ew, "prefetcher not running: the configuration lists no [[prefetch.domain]]")
		return ew.err
	}
	if len(entries) == 0 {
		fmt.Fprintf(ew, "no entry matches (%d entries in all)\n", len(st.Prefetch))
		return ew.err
	}
	now := st.Generated
	if now.IsZero() {
		now = time.Now()
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tRESOLVER\tPARTITION\tMODE\tSTATE\tREFRESHED\tTTL\tLEFT\tNEXT\tFAILURES\tEXPIRED\tGAP (MAX)\tLAST ERROR")
	for _, pe := range entries {
		refreshed, next := "never", "-"
		if !pe.LastRefresh.IsZero() {
			refreshed = compact(now.Sub(pe.LastRefresh)) + " ago"
		}
		if !pe.NextRun.IsZero() {
			next = "in " + compact(pe.NextRun.Sub(now))
		}
		gap := "-"
		if pe.MaxGapMillis > 0 {
			gap = fmt.Sprintf("%s (%s)", ms(pe.GapMillis), ms(pe.MaxGapMillis))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", pe.Name, pe.Type, pe.Resolver, dash(pe.Partition),
			pe.Mode, pe.State, refreshed, seconds(pe.TTLSeconds), seconds(pe.RemainingSeconds), next, pe.Failures, pe.Expired, gap, oneLine(dash(pe.LastError), 40))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		return fmt.Errorf("write prefetch: %w", err)
	}
	return ew.err
}

func seconds(n int) string { return strconv.Itoa(n) + "s" }

// ms formats milliseconds to a tenth ("133.5ms").
func ms(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "ms" }
