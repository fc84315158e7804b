package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"lbdns/control"
)

// topCmd shows the heaviest keys of one kind (clients by default) the
// daemon counted over a window (its short window by default), of the
// responder's queries and of the resolvers' (dnstap) apart: each with
// its estimated queries and rate, the error of the estimate (the true
// count lies between the estimate less the error and the estimate) and
// its share; then the window's queries by reply code. With -o json: the
// /v1/top document of the source, or with --source all an array of
// both.
func topCmd(fs *flag.FlagSet) action {
	window := fs.Duration("window", 0, "the `window` to look back over, such as 10s or 1m (default: the daemon's flood.short_window)")
	limit := fs.Int("limit", defaultTopLimit, "the `number` of keys to print, heaviest first (0: every key counted; -o json has them all)")
	source := fs.String("source", "all", "the `queries` to count: responder (the GSLB responder's), dnstap (the resolvers'), or all (each apart; dnstap's when it counted any)")
	return func(e *env, args []string) error {
		kind := "clients"
		if len(args) > 0 {
			kind = args[0]
			if !slices.Contains(control.TopKinds(), kind) {
				return usageErrorf("unknown kind %q (want %s)", kind, strings.Join(control.TopKinds(), ", "))
			}
			args = args[1:]
		}
		if err := wantArgs(args); err != nil {
			return err
		}
		if *window < 0 {
			return usageErrorf("--window %s: want a positive duration", *window)
		}
		if *limit < 0 {
			return usageErrorf("--limit %d: want 0 (every key) or more", *limit)
		}
		sources := control.TopSources()
		if *source != "all" {
			if !slices.Contains(sources, *source) {
				return usageErrorf("--source %q: want responder, dnstap or all", *source)
			}
			sources = []string{*source}
		}
		ctx, cancel := e.request()
		defer cancel()
		var reps []*control.TopReply
		for _, src := range sources {
			rep, err := e.client().Top(ctx, src, kind, *window)
			if err != nil {
				return err
			}
			rep.Source = src // what was asked for
			// With all, the resolvers' view only when dnstap counted
			// queries (a daemon without [dnstap] has none).
			if *source == "all" && src == control.TopDnstap && rep.Queries == 0 {
				continue
			}
			reps = append(reps, rep)
		}
		if e.json() {
			if *source != "all" {
				return e.writeJSON(reps[0])
			}
			return e.writeJSON(reps)
		}
		for i, rep := range reps {
			if i > 0 {
				if _, err := fmt.Fprintln(e.stdout); err != nil {
					return err
				}
			}
			if err := writeTop(e, rep, *limit); err != nil {
				return err
			}
		}
		return nil
	}
}

// defaultTopLimit is how many keys lbctl top prints by default.
const defaultTopLimit = 20

// writeTop prints rep's heaviest limit keys (0: all), saying how many
// more there are.
func writeTop(e *env, rep *control.TopReply, limit int) error {
	ew := &errWriter{w: e.stdout}
	// The window asked for (the epochs merged may cover a little more:
	// the rate is over what they cover).
	span := rep.Window
	if d, err := time.ParseDuration(rep.Window); err == nil {
		span = compact(d)
	} else if span == "" {
		span = compact(time.Duration(rep.Seconds * float64(time.Second)))
	}
	fmt.Fprintf(ew, "top %s of the %s queries over the last %s: %d queries, %.0f/s", rep.Kind, sourceWords(rep.Source), span, rep.Queries, rep.Rate)
	if len(rep.Rcodes) > 0 {
		codes := make([]string, 0, len(rep.Rcodes))
		for c := range rep.Rcodes {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		parts := make([]string, len(codes))
		for i, c := range codes {
			parts[i] = fmt.Sprintf("%s %d", c, rep.Rcodes[c])
		}
		fmt.Fprintf(ew, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(ew)
	if len(rep.Entries) == 0 {
		fmt.Fprintln(ew, "no queries counted in that window")
		return ew.err
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tQUERIES\tERROR\tRATE/S\tSHARE")
	entries := rep.Entries
	if limit > 0 && len(entries) > limit {
		entries = entries[:limit]
	}
	for _, t := range entries {
		fmt.Fprintf(tw, "%s\t%d\t-%d\t%.1f\t%.1f%%\n", t.Key, t.Count, t.Error, t.Rate, 100*t.Share)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		return fmt.Errorf("write top: %w", err)
	}
	if more := len(rep.Entries) - len(entries); more > 0 {
		fmt.Fprintf(ew, "(%d more keys: --limit 0 prints them all)\n", more)
	}
	fmt.Fprintln(ew, "(the true count lies between QUERIES less ERROR and QUERIES)")
	return ew.err
}

// sourceWords names a source of queries in a heading.
func sourceWords(source string) string {
	switch source {
	case control.TopResponder:
		return "responder's"
	case control.TopDnstap:
		return "resolvers' (dnstap)"
	}
	return source
}

// floodBanner prints a line per flood alarm raised, naming the heaviest
// client and name of the seconds that raised it (lbctl top shows more).
func (sw *statusWriter) floodBanner(f *control.FloodStatus) {
	if f == nil {
		return
	}
	for _, a := range f.Alarms {
		what := fmt.Sprintf("%s at %.0f/s, baseline %.0f/s", a.ID, a.Rate, a.Baseline)
		if a.Reason == "share" {
			what = fmt.Sprintf("%s %s has %.0f%% of the %s %.0f queries/s", strings.TrimSuffix(a.Kind, "s"), a.Key, 100*a.Share, sourceWords(a.Source), a.Rate)
		}
		var tops []string
		seen := ""
		for _, t := range a.Top {
			if (t.Kind == "clients" || t.Kind == "names") && len(t.Entries) > 0 {
				tops = append(tops, fmt.Sprintf("top %s %s %.0f/s", strings.TrimSuffix(t.Kind, "s"), t.Entries[0].Key, t.Entries[0].Rate))
				seen = t.Source
			}
		}
		if len(tops) > 0 {
			what += "; of the " + sourceWords(seen) + " queries, " + strings.Join(tops, ", ")
		}
		sw.printf("!! FLOOD ALARM since %s: %s (lbctl top)\n", a.Since.UTC().Format(time.RFC3339), what)
	}
}
