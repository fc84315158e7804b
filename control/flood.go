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

// The sources of the queries GET /v1/top counts, each apart: the GSLB
// responder's own, and the resolvers' (dnstap).
const (
	TopResponder = "responder"
	TopDnstap    = "dnstap"
)

// TopSources returns the sources GET /v1/top and lbctl top take.
func TopSources() []string { return []string{TopResponder, TopDnstap} }

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
// window, of the queries of one source.
type TopReply struct {
	// Source is where the queries were seen: responder (the GSLB
	// responder's own) or dnstap (the resolvers'); the two are
	// counted apart.
	Source string `json:"source"`
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
	// ID names it: the source of a rate alarm ("responder", "dnstap",
	// "vip web"), or "share SOURCE KIND KEY".
	ID string `json:"id"`
	// Source is the rate's source, or the source of the queries whose
	// share raised it (responder, dnstap).
	Source string `json:"source,omitempty"`
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
	// that raised it, of the queries of the source that raised it (a
	// VIP's: dnstap, the resolvers' queries its packets carry).
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
	// top talkers), of each source that counted queries, apart: the
	// responder's, then dnstap's.
	Top []TopReply `json:"top,omitempty"`
}

// TopBackend is the daemon's side of GET /v1/top.
type TopBackend interface {
	// Top returns the heaviest keys of kind (one of TopKinds) over
	// window, of the queries of source (one of TopSources). It returns
	// a Malformed *Error for a window beyond what is kept, an
	// Unavailable one when queries are not counted.
	Top(ctx context.Context, source, kind string, window time.Duration) (*TopReply, error)
}

// topQuery parses the query of GET /v1/top: source (default
// responder), kind (default clients) and window (a duration, default 0:
// the backend's short window).
func topQuery(q url.Values) (string, string, time.Duration, error) {
	for k := range q {
		if k != "kind" && k != "window" && k != "source" {
			return "", "", 0, Errorf(Malformed, "unknown parameter %q (want source, kind, window)", k)
		}
	}
	source := q.Get("source")
	if source == "" {
		source = TopResponder
	}
	if !slices.Contains(TopSources(), source) {
		return "", "", 0, Errorf(Malformed, "source %q: want responder or dnstap", source)
	}
	kind := q.Get("kind")
	if kind == "" {
		kind = "clients"
	}
	if !slices.Contains(topKinds, kind) {
		return "", "", 0, Errorf(Malformed, "kind %q: want one of clients, prefixes, names, suffixes, nametypes", kind)
	}
	var window time.Duration
	if w := q.Get("window"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 {
			return "", "", 0, Errorf(Malformed, "window %q: want a positive duration such as 10s or 1m", w)
		}
		window = d
	}
	return source, kind, window, nil
}

// handleTop answers GET /v1/top?source=S&kind=K&window=W.
func (s *Server) handleTop(w http.ResponseWriter, r *http.Request) {
	source, kind, window, err := topQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	tb, ok := route[TopBackend](s.parts, s.backend)
	if !ok {
		writeError(w, Errorf(Unavailable, "this daemon counts no queries"))
		return
	}
	rep, err := tb.Top(r.Context(), source, kind, window)
	if err != nil {
		writeError(w, s.backendError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Top asks GET /v1/top for the heaviest keys of kind over window (0:
// the daemon's short window) of the queries of source (responder,
// dnstap).
func (c *Client) Top(ctx context.Context, source, kind string, window time.Duration) (*TopReply, error) {
	q := url.Values{"source": {source}, "kind": {kind}}
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

// floodAlarmView is one alarm raised, in the page's words; Seen names
// the source of the queries its top lists count.
type floodAlarmView struct {
	ID, What, Seen string
	Since          timeCell
	Clients        string
	Names          string
}

// topView is one kind's top talkers of one source.
type topView struct {
	Source  string
	Kind    string
	Rate    string
	Entries []topEntryView
}

// topEntryView is one top talker: its rate with the error, its share.
type topEntryView struct {
	Key, Rate, Error, Share string
}

// pageSourceWords names a source of queries on the page.
func pageSourceWords(source string) string {
	switch source {
	case TopResponder:
		return "responder's"
	case TopDnstap:
		return "resolvers' (dnstap)"
	}
	return source
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
			what = fmt.Sprintf("%s %s takes %.0f%% of the %s %.0f queries/s", strings.TrimSuffix(a.Kind, "s"), a.Key, 100*a.Share, pageSourceWords(a.Source), a.Rate)
		}
		av := floodAlarmView{ID: a.ID, What: what, Since: cell(a.Since, now)}
		for _, t := range a.Top {
			av.Seen = pageSourceWords(t.Source)
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
		tv := topView{Source: t.Source, Kind: t.Kind, Rate: fmt.Sprintf("%.0f", t.Rate)}
		for _, e := range t.Entries {
			tv.Entries = append(tv.Entries, topEntryView{Key: e.Key, Rate: fmt.Sprintf("%.1f", e.Rate),
				Error: fmt.Sprintf("%.1f", e.RateError), Share: fmt.Sprintf("%.1f%%", 100*e.Share)})
		}
		v.Top = append(v.Top, tv)
	}
	return v
}
