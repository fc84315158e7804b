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
// daemon counted over a window (its short window by default): each with
// its estimated queries and rate, the error of the estimate (the true
// count lies between the estimate less the error and the estimate) and
// its share; then the window's queries by reply code. With -o json: the
// /v1/top document.
func topCmd(fs *flag.FlagSet) action {
	window := fs.Duration("window", 0, "the `window` to look back over, such as 10s or 1m (default: the daemon's flood.short_window)")
	limit := fs.Int("limit", defaultTopLimit, "the `number` of keys to print, heaviest first (0: every key counted; -o json has them all)")
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
		ctx, cancel := e.request()
		defer cancel()
		rep, err := e.client().Top(ctx, kind, *window)
		if err != nil {
			return err
		}
		if e.json() {
			return e.writeJSON(rep)
		}
		return writeTop(e, rep, *limit)
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
	fmt.Fprintf(ew, "top %s over the last %s: %d queries, %.0f/s", rep.Kind, span, rep.Queries, rep.Rate)
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

// floodBanner prints a line per flood alarm raised, naming the heaviest
// client and name of the seconds that raised it (lbctl top shows more).
func (sw *statusWriter) floodBanner(f *control.FloodStatus) {
	if f == nil {
		return
	}
	for _, a := range f.Alarms {
		what := fmt.Sprintf("%s at %.0f/s, baseline %.0f/s", a.ID, a.Rate, a.Baseline)
		if a.Reason == "share" {
			what = fmt.Sprintf("%s %s has %.0f%% of %.0f queries/s", strings.TrimSuffix(a.Kind, "s"), a.Key, 100*a.Share, a.Rate)
		}
		var tops []string
		for _, t := range a.Top {
			if (t.Kind == "clients" || t.Kind == "names") && len(t.Entries) > 0 {
				tops = append(tops, fmt.Sprintf("top %s %s %.0f/s", strings.TrimSuffix(t.Kind, "s"), t.Entries[0].Key, t.Entries[0].Rate))
			}
		}
		if len(tops) > 0 {
			what += "; " + strings.Join(tops, ", ")
		}
		sw.printf("!! FLOOD ALARM since %s: %s (lbctl top)\n", a.Since.UTC().Format(time.RFC3339), what)
	}
}
