package configs

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// icmpDoc is a valid document with an icmp check (unused by the resolver
// pool, which keeps its dns check), plus extra text appended to the
// [check.ping] table's settings.
func icmpDoc(check, settings string) string {
	return okDoc + "\n[check.ping]\nkind = \"icmp\"\n" + check + "\n[check.ping.icmp]\n" + settings + "\n"
}

func TestICMPDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
	}{
		{"empty table", icmpDoc("", "")},
		{"no table", okDoc + "\n[check.ping]\nkind = \"icmp\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), "icmp.toml")
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Check("ping").ICMP
			want := &ICMPCheck{
				Count:          3,
				Interval:       Duration{100 * time.Millisecond},
				Size:           24,
				MaxLossPercent: 34,
				Privileged:     "auto",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("defaults = %+v, want %+v", got, want)
			}
			if cfg.Check("ping").Spec() != any(got) {
				t.Error("Spec() is not the icmp settings")
			}
		})
	}
}

func TestICMPSettings(t *testing.T) {
	cfg, err := Parse([]byte(icmpDoc(`timeout = "900ms"`, `count = 5
interval = "50ms"
size = 56
max_loss_percent = 0
max_rtt = "20ms"
privileged = "unprivileged"`)), "icmp.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Check("ping").ICMP
	want := &ICMPCheck{Count: 5, Interval: Duration{50 * time.Millisecond}, Size: 56, MaxRTT: Duration{20 * time.Millisecond}, Privileged: "unprivileged"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings = %+v, want %+v", got, want)
	}
}

func TestICMPValidation(t *testing.T) {
	for _, tc := range []struct {
		name, check, settings string
		// want is the text of the one problem expected.
		want string
	}{
		{"count zero", "", "count = 0", `icmp.toml:24: check.ping.icmp.count: value "0": must be between 1 and 100`},
		{"count big", "", "count = 101", `check.ping.icmp.count: value "101": must be between 1 and 100`},
		{"count×interval over timeout", `timeout = "1s"`, "count = 10\ninterval = \"100ms\"",
			`check.ping.icmp.interval: value "100ms": count × interval (10 × 100ms = 1s) must be less than the check's timeout (1s)`},
		{"interval zero", "", `interval = "0s"`, `check.ping.icmp.interval: value "0s": must be at least 1ms`},
		{"size small", "", "size = 23", `check.ping.icmp.size: value "23": must be between 24 and 65507 bytes`},
		{"size big", "", "size = 65508", `check.ping.icmp.size: value "65508": must be between 24 and 65507 bytes`},
		{"loss 100", "", "max_loss_percent = 100", `check.ping.icmp.max_loss_percent: value "100": must be between 0 and 99`},
		{"loss negative", "", "max_loss_percent = -1", `check.ping.icmp.max_loss_percent: value "-1": must be between 0 and 99`},
		{"max_rtt at timeout", `timeout = "1s"`, `max_rtt = "1s"`, `check.ping.icmp.max_rtt: value "1s": must be more than zero and less than the check's timeout (1s)`},
		{"privileged", "", `privileged = "yes"`, `check.ping.icmp.privileged: value "yes": unknown socket kind`},
		{"unknown key", "", `ttl = 3`, `check.ping.icmp.ttl: unknown key`},
		{"float loss", "", `max_loss_percent = 3.5`, `check.ping.icmp.max_loss_percent: value "3.5": must be an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(icmpDoc(tc.check, tc.settings)), "icmp.toml")
			ps := Problems(err)
			if len(ps) != 1 || !strings.Contains(ps[0].Error(), tc.want) {
				t.Fatalf("problems = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestICMPSettingsUnderOtherKind(t *testing.T) {
	doc := okDoc + "\n[check.ping]\nkind = \"dns\"\n[check.ping.dns]\nqname = \"example.com\"\n[check.ping.icmp]\ncount = 3\n"
	_, err := Parse([]byte(doc), "icmp.toml")
	if err == nil || !strings.Contains(err.Error(), `check.ping.icmp: a [check.ping.icmp] sub-table, but the check's kind is "dns"`) {
		t.Fatalf("err = %v, want the icmp sub-table refused", err)
	}
}

func TestICMPMovedKey(t *testing.T) {
	doc := okDoc + "\n[check.ping]\nkind = \"icmp\"\nmax_loss_percent = 10\n"
	_, err := Parse([]byte(doc), "icmp.toml")
	if err == nil || !strings.Contains(err.Error(), "check.ping.max_loss_percent: value \"10\": moved to [check.ping.icmp]") {
		t.Fatalf("err = %v, want the key sent to [check.ping.icmp]", err)
	}
}

// TestPoolNeedsDNSCheck: a resolver pool whose check is of another kind is
// refused at the pool's check key.
func TestPoolNeedsDNSCheckICMP(t *testing.T) {
	doc := strings.Replace(okDoc, `check = "c"`, `check = "ping"`, 1) + "\n[check.ping]\nkind = \"icmp\"\n"
	_, err := Parse([]byte(doc), "icmp.toml")
	ps := Problems(err)
	want := `icmp.toml:10: pool[0].check: value "ping": resolver pools need a dns check; icmp checks are for GSLB members`
	if len(ps) != 1 || ps[0].Error() != want {
		t.Fatalf("problems = %v, want %s", err, want)
	}
}

func TestICMPProbeIdentity(t *testing.T) {
	parse := func(settings string) string {
		t.Helper()
		cfg, err := Parse([]byte(icmpDoc("", settings)), "icmp.toml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Check("ping").ProbeIdentity()
	}
	base := parse("")
	if parse(`privileged = "raw"`) != base {
		t.Error("the socket kind changed the probe identity")
	}
	for _, s := range []string{"count = 4", `interval = "50ms"`, "size = 64", "max_loss_percent = 0", `max_rtt = "10ms"`} {
		if parse(s) == base {
			t.Errorf("%s did not change the probe identity", s)
		}
	}
}

// TestICMPFullExample: the commented-out icmp check at the end of
// full.toml, uncommented, is valid and means what its comments say.
func TestICMPFullExample(t *testing.T) {
	b, err := os.ReadFile("full.toml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n# [check.ping]\n")
	if start < 0 {
		t.Fatal("full.toml has no commented [check.ping] example")
	}
	var ex strings.Builder
	for _, l := range strings.Split(doc[start+1:], "\n") {
		if !strings.HasPrefix(l, "# ") && l != "" || strings.HasPrefix(l, "# --") {
			break // the end of the file, or the next section's rule
		}
		ex.WriteString(strings.TrimPrefix(l, "# ") + "\n")
	}
	cfg, err := Parse([]byte(doc+"\n"+ex.String()), "full.toml")
	if err != nil {
		t.Fatalf("full.toml with the icmp example uncommented: %v", err)
	}
	k := cfg.Check("ping")
	want := &ICMPCheck{Count: 3, Interval: Duration{100 * time.Millisecond}, Size: 24, MaxLossPercent: 34,
		MaxRTT: Duration{50 * time.Millisecond}, Privileged: "auto"}
	if k == nil || k.Kind != "icmp" || !reflect.DeepEqual(k.ICMP, want) {
		t.Fatalf("example check = %+v, want kind icmp with %+v", k, want)
	}
}
