package intent

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
)

// gslbConfig has zones example.com. and example.net., names
// www.example.com., api.example.com. and www.example.net.
func gslbConfig() *configs.Config {
	cfg := testConfig()
	cfg.GSLB.Zones = []configs.GSLBZone{{Name: "example.com", Apex: "example.com."}, {Name: "Example.NET", Apex: "example.net."}}
	cfg.GSLB.Names = []configs.GSLBName{
		{Name: "www.example.com", FQDN: "www.example.com."},
		{Name: "api.example.com", FQDN: "api.example.com."},
		{Name: "www.example.net", FQDN: "www.example.net."},
	}
	return cfg
}

func TestApplyGSLB(t *testing.T) {
	cfg := gslbConfig()
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.FixedZone("CET", 3600))
	old := at.Add(-time.Hour).UTC()
	all := Emergency{Mode: ModeStatic, Reason: "melting", Set: old, By: "uid 0"}
	zone := Emergency{Zone: "example.com.", Mode: ModeStatic, Reason: "wrong answers", Set: old}
	orphan := Emergency{Name: "gone.example.com.", Mode: ModeStatic, Reason: "x", Set: old}
	raise := TTLRaise{Name: "www.example.com.", Seconds: 300, Reason: "load", Set: old}

	for _, tc := range []struct {
		name    string
		cur     State
		req     GSLBRequest
		want    State
		msg     string
		changed bool
		kind    Kind
		errHas  string
	}{
		{name: "off one name, canonicalised", req: GSLBRequest{Action: ActionOff, Name: "WWW.example.com", Reason: "melting", By: "uid 0", At: at},
			want: State{Emergencies: []Emergency{{Name: "www.example.com.", Mode: ModeStatic, Reason: "melting", Set: at.UTC(), By: "uid 0"}}},
			msg:  "intelligent resolution off for name www.example.com.: static answers, ECS scope 0", changed: true},
		{name: "off again same reason", cur: State{Emergencies: []Emergency{zone}}, req: GSLBRequest{Action: ActionOff, Zone: "example.com.", Reason: "wrong answers", At: at},
			want: State{Emergencies: []Emergency{zone}}, msg: "intelligent resolution is already off for zone example.com.; nothing changed"},
		{name: "off again new reason", cur: State{Emergencies: []Emergency{zone}}, req: GSLBRequest{Action: ActionOff, Zone: "example.com", Reason: "still wrong", At: at},
			want: State{Emergencies: []Emergency{{Zone: "example.com.", Mode: ModeStatic, Reason: "still wrong", Set: at.UTC()}}},
			msg:  "intelligent resolution still off for zone example.com.; reason updated", changed: true},
		{name: "off all", req: GSLBRequest{Action: ActionOff, Reason: "melting", At: at},
			want: State{Emergencies: []Emergency{{Mode: ModeStatic, Reason: "melting", Set: at.UTC()}}}, msg: "intelligent resolution off for all names: static answers, ECS scope 0", changed: true},
		{name: "off without reason", req: GSLBRequest{Action: ActionOff, Name: "www.example.com"}, kind: BadRequest, errHas: "reason: required"},
		{name: "name and zone", req: GSLBRequest{Action: ActionOff, Name: "www.example.com", Zone: "example.com", Reason: "r"}, kind: BadRequest, errHas: "at most one"},
		{name: "bad action", req: GSLBRequest{Action: "of"}, kind: BadRequest, errHas: `not "of"`},
		{name: "unknown name suggests", req: GSLBRequest{Action: ActionOff, Name: "ww.example.com", Reason: "r"}, kind: NotFound,
			errHas: `unknown GSLB name "ww.example.com." (did you mean "www.example.com."?)`},
		{name: "unknown zone", req: GSLBRequest{Action: ActionOn, Zone: "example.org"}, kind: NotFound, errHas: `unknown GSLB zone "example.org."`},
		{name: "on removes one scope, wider stays", cur: State{Emergencies: []Emergency{all, zone}}, req: GSLBRequest{Action: ActionOn, Zone: "example.com"},
			want: State{Emergencies: []Emergency{all}}, msg: "intelligent resolution back on for zone example.com.: dynamic answers; still covered by the entry of all names", changed: true},
		{name: "on without scope clears every switch", cur: State{Emergencies: []Emergency{all, zone, orphan}, TTLRaises: []TTLRaise{raise}}, req: GSLBRequest{Action: ActionOn},
			want: State{TTLRaises: []TTLRaise{raise}}, msg: "intelligent resolution back on for all names: dynamic answers", changed: true},
		{name: "on clears an orphan", cur: State{Emergencies: []Emergency{orphan}}, req: GSLBRequest{Action: ActionOn, Name: "gone.example.com"},
			want: State{Emergencies: []Emergency{}}, msg: "intelligent resolution back on for name gone.example.com.: dynamic answers", changed: true},
		{name: "on a name covered by its zone", cur: State{Emergencies: []Emergency{zone}}, req: GSLBRequest{Action: ActionOn, Name: "www.example.com"},
			kind: Conflict, errHas: "intelligent resolution is not off for name www.example.com.; it is still covered by the entry of zone example.com."},
		{name: "on when nothing is off", req: GSLBRequest{Action: ActionOn, Name: "www.example.com"}, msg: "intelligent resolution is not off for name www.example.com.; nothing changed"},
		{name: "ttl raise", req: GSLBRequest{Action: ActionTTL, Seconds: 300, Name: "www.example.com", Reason: "load", At: at},
			want: State{TTLRaises: []TTLRaise{{Name: "www.example.com.", Seconds: 300, Reason: "load", Set: at.UTC()}}}, msg: "TTL of name www.example.com. raised to 300s", changed: true},
		{name: "ttl change", cur: State{TTLRaises: []TTLRaise{raise}}, req: GSLBRequest{Action: ActionTTL, Seconds: 600, Name: "www.example.com", Reason: "load", At: at},
			want: State{TTLRaises: []TTLRaise{{Name: "www.example.com.", Seconds: 600, Reason: "load", Set: at.UTC()}}}, msg: "TTL of name www.example.com. raised to 600s (was 300s)", changed: true},
		{name: "ttl out of range", req: GSLBRequest{Action: ActionTTL, Seconds: 0, Reason: "r"}, kind: BadRequest, errHas: "seconds: want 1 to 86400, not 0"},
		{name: "ttl clear", cur: State{TTLRaises: []TTLRaise{raise}, Emergencies: []Emergency{zone}}, req: GSLBRequest{Action: ActionTTL, Clear: true, Name: "www.example.com"},
			want: State{TTLRaises: []TTLRaise{}, Emergencies: []Emergency{zone}}, msg: "TTL raise of name www.example.com. cleared: configured TTLs again", changed: true},
		{name: "seconds with off", req: GSLBRequest{Action: ActionOff, Seconds: 3, Reason: "r"}, kind: BadRequest, errHas: "only with ttl"},
		{name: "off with no name configured", req: GSLBRequest{Action: ActionOff, Reason: "r"}, kind: NotFound, errHas: "no GSLB name is configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.name == "off with no name configured" {
				c = testConfig()
			}
			before := tc.cur.Clone()
			next, res, err := ApplyGSLB(tc.cur, tc.req, c)
			if !reflect.DeepEqual(tc.cur, before) {
				t.Fatalf("cur modified: %+v", tc.cur)
			}
			if tc.kind != 0 {
				var ie *Error
				if !errors.As(err, &ie) || ie.Kind != tc.kind || !strings.Contains(ie.Msg, tc.errHas) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.kind, tc.errHas)
				}
				if !reflect.DeepEqual(next, tc.cur) {
					t.Fatalf("refused request changed the state: %+v", next)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Message != tc.msg || res.Changed != tc.changed {
				t.Errorf("result = %q changed=%v, want %q changed=%v", res.Message, res.Changed, tc.msg, tc.changed)
			}
			if !tc.changed {
				tc.want = tc.cur
			}
			if !reflect.DeepEqual(norm(next), norm(tc.want)) {
				t.Errorf("next = %+v\nwant   %+v", next, tc.want)
			}
		})
	}
}

// norm makes empty lists nil for comparison.
func norm(s State) State {
	if len(s.Emergencies) == 0 {
		s.Emergencies = nil
	}
	if len(s.TTLRaises) == 0 {
		s.TTLRaises = nil
	}
	return s
}

func TestEmergencyForMostSpecific(t *testing.T) {
	st := State{
		Emergencies: []Emergency{{Reason: "all"}, {Zone: "example.com.", Reason: "zone"}, {Name: "www.example.com.", Reason: "name"}},
		TTLRaises:   []TTLRaise{{Zone: "example.net.", Seconds: 60}, {Seconds: 30}},
	}
	for _, tc := range []struct{ apex, fqdn, want string }{
		{"example.com.", "www.example.com.", "name"},
		{"example.com.", "api.example.com.", "zone"},
		{"example.net.", "www.example.net.", "all"},
	} {
		if e := st.EmergencyFor(tc.apex, tc.fqdn); e == nil || e.Reason != tc.want {
			t.Errorf("EmergencyFor(%s) = %+v, want %s", tc.fqdn, e, tc.want)
		}
	}
	if r := st.TTLFor("example.net.", "www.example.net."); r == nil || r.Seconds != 60 {
		t.Errorf("TTLFor(www.example.net.) = %+v, want 60", r)
	}
	if r := st.TTLFor("example.com.", "www.example.com."); r == nil || r.Seconds != 30 {
		t.Errorf("TTLFor(www.example.com.) = %+v, want 30", r)
	}
	if (State{}).EmergencyFor("example.com.", "www.example.com.") != nil {
		t.Error("EmergencyFor on an empty state is not nil")
	}
}

func TestGSLBOrphaned(t *testing.T) {
	cfg := gslbConfig()
	if why := GSLBOrphaned(cfg, "www.example.com.", ""); why != "" {
		t.Errorf("configured name orphaned: %s", why)
	}
	if why := GSLBOrphaned(cfg, "gone.example.com.", ""); why != "GSLB name gone.example.com. is not in the configuration" {
		t.Errorf("why = %q", why)
	}
	if why := GSLBOrphaned(cfg, "", "example.org."); why != "GSLB zone example.org. is not in the configuration" {
		t.Errorf("why = %q", why)
	}
	if ZoneOf(cfg, "www.example.net.") != "example.net." || ZoneOf(cfg, "www.example.org.") != "" {
		t.Error("ZoneOf")
	}
}

// TestParseGSLBEntries: the new kinds round-trip through the same
// versioned file; the old file without them keeps its bytes (the golden
// test of overrides-v1.json), and bad entries are errors.
func TestParseGSLBEntries(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	st := State{Overrides: []Override{}, Emergencies: []Emergency{{Zone: "example.com.", Mode: ModeStatic, Reason: "r", Set: at, By: "uid 0"}},
		TTLRaises: []TTLRaise{{Name: "www.example.com.", Seconds: 300, Reason: "r", Set: at}}}
	b, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version": 1`) || !strings.Contains(string(b), `"emergencies"`) || !strings.Contains(string(b), `"ttl_raises"`) {
		t.Fatalf("file:\n%s", b)
	}
	got, err := Parse(b)
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	old, err := os.ReadFile("testdata/overrides-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := Parse(old); err != nil || st.Emergencies != nil || st.TTLRaises != nil {
		t.Fatalf("old file: %+v, %v", st, err)
	}
	for _, bad := range []string{
		`{"version":1,"overrides":[],"emergencies":[{"mode":"dynamic","set":"2026-11-30T05:00:00Z"}]}`,
		`{"version":1,"overrides":[],"emergencies":[{"name":"WWW.example.com","mode":"static","set":"2026-11-30T05:00:00Z"}]}`,
		`{"version":1,"overrides":[],"emergencies":[{"mode":"static","set":"2026-11-30T05:00:00Z"},{"mode":"static","set":"2026-11-30T05:00:00Z"}]}`,
		`{"version":1,"overrides":[],"ttl_raises":[{"zone":"example.com.","seconds":0,"set":"2026-11-30T05:00:00Z"}]}`,
		`{"version":1,"overrides":[],"ttl_raises":[{"zone":"example.com.","name":"www.example.com.","seconds":5,"set":"2026-11-30T05:00:00Z"}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}
