package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// TopKinds are the kinds of key GET /v1/top takes.
var topKinds = []string{"clients", "prefixes", "names", "suffixes", "nametypes"}

// TopKinds returns the kinds of key GET /v1/top and lbctl top take.
func TopKinds() []string { return slices.Clone(topKinds) }

// TopEntry is one heavy key of a TopReply: its estimated count over the
// window, with the error bound (the true count is between Count-Error
// and Count).
type TopEntry struct {
	// Key is the address, prefix, name, or name and type.
	Key string `json:"key"`
	// Count is the estimated queries; Error its error.
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
	// Rate and RateError are Count and Error per second of the window.
	Rate      float64 `json:"rate"`
	RateError float64 `json:"rate_error"`
	// Share is Count over the window's Queries.
	Share float64 `json:"share"`
}

// TopReply answers GET /v1/top: the heaviest keys of one kind over a
// window.
type TopReply struct {
	// Kind is clients, prefixes, names, suffixes or nametypes.
	Kind string `json:"kind"`
	// Window is the window asked for; Start and End the whole seconds
	// it covers (less when the daemon is younger than it).
	Window  string    `json:"window"`
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
	Seconds float64   `json:"seconds"`
	// Queries are the queries the window counted, every key; Rate per
	// second.
	Queries uint64  `json:"queries"`
	Rate    float64 `json:"rate"`
	// Rcodes are those queries by reply code name ("NOERROR",
	// "NXDOMAIN", ..., "none": no reply), when any.
	Rcodes map[string]uint64 `json:"rcodes,omitempty"`
	// Entries are the heaviest keys, largest first.
	Entries []TopEntry `json:"entries"`
}

// FloodAlarm is a flood alarm raised.
type FloodAlarm struct {
	// ID names it: the source of a rate alarm ("responder", "vip web"),
	// or "share KIND KEY".
	ID string `json:"id"`
	// Reason is rise (a rate over its baseline and the floor) or share
	// (one key's share of the short window).
	Reason string `json:"reason"`
	// Since is when it was raised.
	Since time.Time `json:"since"`
	// Rate is the rate that raised it, per second; Baseline the
	// source's baseline then (rate alarms), Floor the floor.
	Rate     float64 `json:"rate"`
	Baseline float64 `json:"baseline,omitempty"`
	Floor    float64 `json:"floor"`
	// Kind, Key and Share: the key and its share (share alarms).
	Kind  string  `json:"kind,omitempty"`
	Key   string  `json:"key,omitempty"`
	Share float64 `json:"share,omitempty"`
	// Top are the heaviest clients, prefixes and names of the seconds
	// that raised it.
	Top []TopReply `json:"top"`
}

// FloodStatus is the flood alarms in GET /v1/status.
type FloodStatus struct {
	// On is whether queries are counted ([flood] enabled).
	On bool `json:"on"`
	// Window is the short window of Top.
	Window string `json:"window,omitempty"`
	// Alarms are the alarms raised now.
	Alarms []FloodAlarm `json:"alarms"`
	// Top are the heaviest clients and names of the short window (the
	// top talkers).
	Top []TopReply `json:"top,omitempty"`
}

// TopBackend is the daemon's side of GET /v1/top.
type TopBackend interface {
	// Top returns the heaviest keys of kind (one of TopKinds) over
	// window. It returns a Malformed *Error for a window beyond
	// what is kept, an Unavailable one when queries are not counted.
	Top(ctx context.Context, kind string, window time.Duration) (*TopReply, error)
}

// topQuery parses the query of GET /v1/top: kind (default clients) and
// window (a duration, default 0: the backend's short window).
func topQuery(q url.Values) (string, time.Duration, error) {
	for k := range q {
		if k != "kind" && k != "window" {
			return "", 0, Errorf(Malformed, "unknown parameter %q (want kind, window)", k)
		}
	}
	kind := q.Get("kind")
	if kind == "" {
		kind = "clients"
	}
	if !slices.Contains(topKinds, kind) {
		return "", 0, Errorf(Malformed, "kind %q: want one of clients, prefixes, names, suffixes, nametypes", kind)
	}
	var window time.Duration
	if w := q.Get("window"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 {
			return "", 0, Errorf(Malformed, "window %q: want a positive duration such as 10s or 1m", w)
		}
		window = d
	}
	return kind, window, nil
}

// handleTop answers GET /v1/top?kind=K&window=W.
func (s *Server) handleTop(w http.ResponseWriter, r *http.Request) {
	kind, window, err := topQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	tb, ok := route[TopBackend](s.parts, s.backend)
	if !ok {
		writeError(w, Errorf(Unavailable, "this daemon counts no queries"))
		return
	}
	rep, err := tb.Top(r.Context(), kind, window)
	if err != nil {
		writeError(w, s.backendError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Top asks GET /v1/top for the heaviest keys of kind over window (0:
// the daemon's short window).
func (c *Client) Top(ctx context.Context, kind string, window time.Duration) (*TopReply, error) {
	q := url.Values{"kind": {kind}}
	if window > 0 {
		q.Set("window", window.String())
	}
	var rep TopReply
	return &rep, c.do(ctx, http.MethodGet, "/top?"+q.Encode(), nil, &rep)
}

// floodView is the flood alarms on the page: a banner per alarm raised,
// and the top talkers of the short window.
type floodView struct {
	Window string
	Alarms []floodAlarmView
	Top    []topView
}

// floodAlarmView is one alarm raised, in the page's words.
type floodAlarmView struct {
	ID, What string
	Since    timeCell
	Clients  string
	Names    string
}

// topView is one kind's top talkers.
type topView struct {
	Kind    string
	Rate    string
	Entries []topEntryView
}

// topEntryView is one top talker: its rate with the error, its share.
type topEntryView struct {
	Key, Rate, Error, Share string
}

// buildFlood is the flood status on the page at now; nil when queries
// are not counted.
func buildFlood(f *FloodStatus, now time.Time) *floodView {
	if f == nil || !f.On {
		return nil
	}
	v := &floodView{Window: f.Window}
	for _, a := range f.Alarms {
		what := fmt.Sprintf("%s at %.0f/s over a baseline of %.0f/s", a.ID, a.Rate, a.Baseline)
		if a.Reason == "share" {
			what = fmt.Sprintf("%s %s takes %.0f%% of %.0f queries/s", strings.TrimSuffix(a.Kind, "s"), a.Key, 100*a.Share, a.Rate)
		}
		av := floodAlarmView{ID: a.ID, What: what, Since: cell(a.Since, now)}
		for _, t := range a.Top {
			keys := make([]string, 0, len(t.Entries))
			for _, e := range t.Entries {
				keys = append(keys, fmt.Sprintf("%s %.0f/s", e.Key, e.Rate))
			}
			switch t.Kind {
			case "clients":
				av.Clients = bannerList(keys, 3)
			case "names":
				av.Names = bannerList(keys, 3)
			}
		}
		v.Alarms = append(v.Alarms, av)
	}
	for _, t := range f.Top {
		tv := topView{Kind: t.Kind, Rate: fmt.Sprintf("%.0f", t.Rate)}
		for _, e := range t.Entries {
			tv.Entries = append(tv.Entries, topEntryView{Key: e.Key, Rate: fmt.Sprintf("%.1f", e.Rate),
				Error: fmt.Sprintf("%.1f", e.RateError), Share: fmt.Sprintf("%.1f%%", 100*e.Share)})
		}
		v.Top = append(v.Top, tv)
	}
	return v
}
