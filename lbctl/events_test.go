package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/poll"
)

// sampleEvents returns n events numbered from 1; every third is an error.
func sampleEvents(n int) []control.Event {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	evs := make([]control.Event, n)
	for i := range evs {
		evs[i] = control.Event{
			Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Kind: control.EventState,
			Subject: "bind-1/recursive", Message: "event number " + string(rune('a'+i)), Error: (i+1)%3 == 0,
		}
	}
	return evs
}

// eventRows returns the table lines after the header, checking it.
func eventRows(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "SEQ TIME KIND SUBJECT MESSAGE" {
		t.Fatalf("no header line:\n%s", out)
	}
	return lines[1:]
}

func TestEvents(t *testing.T) {
	evs := sampleEvents(5)
	f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: evs, Next: 5}}})

	r := lbctl(t, "-socket", f.socket, "events")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	rows := eventRows(t, r.stdout)
	if len(rows) != len(evs) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(evs), r.stdout)
	}
	for i, ev := range evs {
		fields := strings.Fields(rows[i])
		if fields[0] != strconv.FormatUint(ev.Seq, 10) || !strings.HasSuffix(rows[i], ev.Message) {
			t.Errorf("row %d %q does not show event %d", i, rows[i], ev.Seq)
		}
		if !strings.Contains(rows[i], stamp(ev.Time)) || !strings.Contains(rows[i], ev.Subject) {
			t.Errorf("row %d %q lacks the time or subject", i, rows[i])
		}
		if marked := strings.Contains(rows[i], "ERROR: "+ev.Message); marked != ev.Error {
			t.Errorf("row %d %q: error marked %v, event error %v", i, rows[i], marked, ev.Error)
		}
	}

	r = lbctl(t, "-socket", f.socket, "events", "-n", "2")
	rows = eventRows(t, r.stdout)
	if r.code != exitOK || len(rows) != 2 || !strings.HasPrefix(rows[0], "4 ") || !strings.HasPrefix(rows[1], "5 ") {
		t.Fatalf("events -n 2: exit %d, want events 4 and 5, newest last:\n%s", r.code, r.stdout)
	}

	r = lbctl(t, "-socket", f.socket, "events", "-n", "9")
	if rows = eventRows(t, r.stdout); len(rows) != 5 {
		t.Fatalf("events -n 9 printed %d of 5:\n%s", len(rows), r.stdout)
	}

	r = lbctl(t, "-socket", f.socket, "-o", "json", "events", "-n", "3")
	if r.code != exitOK {
		t.Fatalf("json: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := decodeNDJSON(t, r.stdout); !reflect.DeepEqual(got, evs[2:]) {
		t.Errorf("json events %+v, want %+v", got, evs[2:])
	}
}

// decodeNDJSON decodes one event per line.
func decodeNDJSON(t *testing.T, s string) []control.Event {
	t.Helper()
	var out []control.Event
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var ev control.Event
		decodeJSON(t, sc.Text(), &ev)
		out = append(out, ev)
	}
	return out
}

func TestEventsFollow(t *testing.T) {
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			evs := sampleEvents(6)
			f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: evs[:3], Next: 3}}})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out, errb syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"-socket", f.socket, "-o", format, "events", "-f", "-n", "2"}, &out, &errb, noEnv)
			}()

			select {
			case after := <-f.followed:
				if after != 3 {
					t.Errorf("follow asked for events after %d, want 3 (the reply's next)", after)
				}
			case code := <-done:
				t.Fatalf("events -f returned %d before following; stderr:\n%s", code, errb.String())
			case <-time.After(10 * time.Second):
				t.Fatal("events -f never started following")
			}
			for _, ev := range evs[3:] {
				f.stream <- ev
			}
			poll.Until(t, 10*time.Second, "the last streamed event printed", poll.True(func() bool { return strings.Contains(out.String(), evs[5].Message) }))
			cancel()
			select {
			case code := <-done:
				if code != exitOK {
					t.Fatalf("exit %d after cancel, want 0; stderr:\n%s", code, errb.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("events -f did not return after its context was cancelled")
			}

			want := evs[1:] // the last 2 kept, then the 3 streamed
			if format == "json" {
				if got := decodeNDJSON(t, out.String()); !reflect.DeepEqual(got, want) {
					t.Errorf("json events %+v, want %+v", got, want)
				}
				return
			}
			rows := eventRows(t, out.String())
			if len(rows) != len(want) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out.String())
			}
			for i, ev := range want {
				if !strings.HasPrefix(rows[i], strconv.FormatUint(ev.Seq, 10)+" ") || !strings.HasSuffix(rows[i], ev.Message) {
					t.Errorf("row %d %q, want event %d", i, rows[i], ev.Seq)
				}
			}
		})
	}
}

// TestEventsColumnsAlign: long kinds (last-resort) and long subjects
// (gslb:POOL/MEMBER/MONITOR) keep the columns aligned: every line's
// message starts where the header's MESSAGE does.
func TestEventsColumnsAlign(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	evs := []control.Event{
		{Seq: 1, Time: t0, Kind: control.EventState, Subject: "bind-1/recursive", Message: "M1"},
		{Seq: 2, Time: t0, Kind: control.EventLastResort, Subject: "www.gslb.quickstart.test. A", Message: "M2"},
		{Seq: 3, Time: t0, Kind: control.EventState, Subject: "gslb:www-global-anycast/frontend-05.eu-central-1/https-health", Message: "M3"},
		{Seq: 1000, Time: t0, Kind: control.EventServing, Subject: "vip quickstart", Message: "M4"},
	}
	f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: evs, Next: 1000}}})
	r := lbctl(t, "-socket", f.socket, "events")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	col := strings.Index(lines[0], "MESSAGE")
	kindCol := strings.Index(lines[0], "KIND")
	subjCol := strings.Index(lines[0], "SUBJECT")
	for i, l := range lines[1:] {
		want := "M" + strconv.Itoa(i+1)
		if strings.Index(l, want) != col {
			t.Errorf("line %d: message at column %d, want %d:\n%s", i+1, strings.Index(l, want), col, r.stdout)
		}
		if strings.Index(l, evs[i].Kind) != kindCol || strings.Index(l, evs[i].Subject) != subjCol {
			t.Errorf("line %d: kind or subject out of their columns:\n%s", i+1, r.stdout)
		}
	}
}

// quickstartEvents returns the journal of a healthy dry-run quick start,
// the one the status page's tests read (../control/testdata).
func quickstartEvents(t *testing.T) []control.Event {
	t.Helper()
	b, err := os.ReadFile("../control/testdata/quickstart-events.json")
	if err != nil {
		t.Fatal(err)
	}
	var evs []control.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// pageBackend answers the status page's one question with st (the page
// asks nothing else).
type pageBackend struct {
	control.Backend
	st *control.Status
}

func (b pageBackend) Status(context.Context) (*control.Status, error) { return b.st, nil }

// pageRows returns the last sequence number of each row of the status
// page's events table, in the page's order, rendered over evs.
func pageRows(t *testing.T, evs []control.Event) []string {
	t.Helper()
	log := control.NewEventLog(100, nil)
	for _, ev := range evs {
		log.Append(ev)
	}
	srv := control.NewStatusServer(control.StatusOptions{Backend: pageBackend{st: &control.Status{}}, Events: log})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var seqs []string
	for _, m := range regexp.MustCompile(`<tr class="(event[^"]*|routine)" data-seq="(\d+)"`).FindAllStringSubmatch(rec.Body.String(), -1) {
		seqs = append(seqs, m[2])
	}
	return seqs
}

// lastSeq is the last sequence number of a table line: "12" of "12 ..."
// and of "1-12 ...".
func lastSeq(row string) string {
	seq := strings.Fields(row)[0]
	return seq[strings.LastIndex(seq, "-")+1:]
}

// TestEventsForPeople: over a healthy dry-run quick start's journal,
// lbctl events prints the pool's verdict on a line of its own and each
// run of routine work folded into one line, in the status page's order
// (oldest first); --all lists every event; --kind keeps some kinds; -o
// json has the events of the lines (the folded ones with --all).
func TestEventsForPeople(t *testing.T) {
	evs := quickstartEvents(t)
	f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: evs, Next: uint64(len(evs))}}})

	r := lbctl(t, "-socket", f.socket, "events")
	rows := eventRows(t, r.stdout)
	if r.code != exitOK || len(rows) != 3 {
		t.Fatalf("exit %d, want 3 lines (start-up, verdict, IPVS operations):\n%s%s", r.code, r.stdout, r.stderr)
	}
	for i, want := range [][]string{
		{"1-10 ", " routine ", "1 start-up line, 9 back ends up at their first checks " + clock(evs[0].Time) + "–" + clock(evs[9].Time) + " (--all lists them)"},
		{"11 ", " pool ", " local ", "pool local: no-facts -> healthy: 5 of 5 up"},
		{"12-23 ", " routine ", "12 IPVS operations (dry run) " + clock(evs[11].Time) + "–" + clock(evs[22].Time)},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, rows[i], w)
			}
		}
	}
	var got []string
	for _, row := range rows {
		got = append(got, lastSeq(row))
	}
	if page := pageRows(t, evs); !slices.Equal(got, page) {
		t.Errorf("lbctl events lists %v, the status page %v: not in one order", got, page)
	}

	if r = lbctl(t, "-socket", f.socket, "events", "--all"); len(eventRows(t, r.stdout)) != len(evs) {
		t.Errorf("--all: want %d lines:\n%s", len(evs), r.stdout)
	}
	if r = lbctl(t, "-socket", f.socket, "events", "-n", "1"); len(eventRows(t, r.stdout)) != 1 || !strings.HasPrefix(eventRows(t, r.stdout)[0], "12-23 ") {
		t.Errorf("-n 1: want the IPVS operations' line:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		seqs []string
	}{
		{[]string{"--kind", "pool"}, []string{"11"}},
		{[]string{"--kind", "pool,state"}, []string{"10", "11"}},
		{[]string{"--kind", "ipvs"}, []string{"23"}},
		{[]string{"--kind", "ipvs", "--all", "-n", "2"}, []string{"22", "23"}},
		{[]string{"--kind", "reload"}, nil},
	} {
		r := lbctl(t, append([]string{"-socket", f.socket, "events"}, tc.args...)...)
		var got []string
		for _, row := range eventRows(t, r.stdout) {
			got = append(got, lastSeq(row))
		}
		if r.code != exitOK || !slices.Equal(got, tc.seqs) {
			t.Errorf("events %v: exit %d, lines ending at %v, want %v:\n%s", tc.args, r.code, got, tc.seqs, r.stdout)
		}
	}

	r = lbctl(t, "-socket", f.socket, "-o", "json", "events")
	if got := decodeNDJSON(t, r.stdout); len(got) != 1 || got[0].Seq != 11 || got[0].Verdict != control.VerdictUp {
		t.Errorf("json: %+v, want the verdict alone", got)
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "events", "--all")
	if got := decodeNDJSON(t, r.stdout); !reflect.DeepEqual(got, evs) {
		t.Errorf("json --all: %d events, want the %d of the journal", len(got), len(evs))
	}
}

// TestEventsUnknownKind: an unknown --kind is a usage error (exit 2)
// that suggests the kind meant and lists the kinds; nothing is asked.
func TestEventsUnknownKind(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: sampleEvents(2), Next: 2}}})
	r := lbctl(t, "-socket", f.socket, "events", "--kind", "state,pol")
	if r.code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
	for _, want := range []string{`unknown event kind "pol"`, `did you mean "pool"?`, "kinds: state, pool, override"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("an unknown kind was sent: %+v", got)
	}
}

// TestEventsFollowFolds: while following, a run of routine work is
// printed as one line when the next event for people comes.
func TestEventsFollowFolds(t *testing.T) {
	evs := quickstartEvents(t)
	f := startFake(t, map[string]reply{"GET /v1/events": {body: control.EventsReply{Events: []control.Event{}, Next: 0}}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-socket", f.socket, "events", "-f"}, &out, &errb, noEnv) }()
	select {
	case <-f.followed:
	case <-time.After(10 * time.Second):
		t.Fatal("events -f never started following")
	}
	for _, ev := range evs[:11] {
		f.stream <- ev
	}
	poll.Until(t, 10*time.Second, "the verdict printed", poll.True(func() bool { return strings.Contains(out.String(), "no-facts -> healthy") }))
	cancel()
	<-done
	rows := eventRows(t, out.String())
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "1-10 ") || !strings.Contains(rows[0], "9 back ends up at their first checks") || !strings.HasPrefix(rows[1], "11 ") {
		t.Errorf("want the folded start-up, then the verdict:\n%s", out.String())
	}
}
