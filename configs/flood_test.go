package configs

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestFloodDefaults(t *testing.T) {
	c, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Flood{Enabled: true, Floor: 1000, Rise: 4, SharePercent: 50, ShareKinds: []string{"clients", "prefixes"},
		Baseline: Duration{5 * time.Minute}, ClearAfter: Duration{10 * time.Second},
		ShortWindow: Duration{10 * time.Second}, LongWindow: Duration{time.Minute}, SummarySize: 512, Top: 5, SampleAbove: 20000}
	f := c.Flood
	if f.Enabled != want.Enabled || f.Floor != want.Floor || f.Rise != want.Rise || f.SharePercent != want.SharePercent ||
		!slices.Equal(f.ShareKinds, want.ShareKinds) || f.Baseline != want.Baseline || f.ClearAfter != want.ClearAfter ||
		f.ShortWindow != want.ShortWindow || f.LongWindow != want.LongWindow || f.SummarySize != want.SummarySize || f.Top != want.Top || f.SampleAbove != want.SampleAbove || f.AutoTTLRaise != 0 {
		t.Errorf("defaults:\n got %+v\nwant %+v", f, want)
	}
}

func TestFloodSet(t *testing.T) {
	base, err := os.ReadFile("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	data := append(base, []byte(`
[flood]
enabled = false
floor = 50
rise = 10
share_percent = 0
share_kinds = ["clients", "names"]
baseline = "1m"
clear_after = "3s"
short_window = "5s"
long_window = "30s"
summary_size = 128
top = 3
`)...)
	c, err := Parse(data, "set.toml")
	if err != nil {
		t.Fatal(err)
	}
	f := c.Flood
	if f.Enabled || f.Floor != 50 || f.Rise != 10 || f.SharePercent != 0 || !slices.Equal(f.ShareKinds, []string{"clients", "names"}) ||
		f.Baseline.Duration != time.Minute || f.ClearAfter.Duration != 3*time.Second || f.ShortWindow.Duration != 5*time.Second ||
		f.LongWindow.Duration != 30*time.Second || f.SummarySize != 128 || f.Top != 3 {
		t.Errorf("set: %+v", f)
	}
}
