package main

import (
	"bufio"
	"context"
	"reflect"
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
