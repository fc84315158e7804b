package report

import (
	"slices"
	"testing"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
)

func TestOverrides(t *testing.T) {
	cfg, err := configs.Parse([]byte(testConfig), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	list := []intent.Override{
		{Resolver: "c", Action: intent.ActionDisable, Reason: "upgrade", Set: t0, By: "uid 0"},
		{Resolver: "b", VIP: "v2", Action: intent.ActionDrain, Set: t0},
		{Resolver: "gone", Action: intent.ActionDrain, Set: t0},
		{Resolver: "a", Pool: "nope", Action: intent.ActionDisable, Set: t0},
		{Resolver: "a", VIP: "v9", Action: intent.ActionDrain, Set: t0},
	}
	want := []control.Override{
		{Resolver: "c", Action: "disable", Reason: "upgrade", Set: t0, By: "uid 0"},
		{Resolver: "b", VIP: "v2", Action: "drain", Set: t0},
		{Resolver: "gone", Action: "drain", Set: t0, Orphaned: true},
		{Resolver: "a", Pool: "nope", Action: "disable", Set: t0, Orphaned: true},
		{Resolver: "a", VIP: "v9", Action: "drain", Set: t0, Orphaned: true},
	}
	if got := Overrides(cfg, list); !slices.Equal(got, want) {
		t.Errorf("Overrides:\n got %+v\nwant %+v", got, want)
	}
	if got := Overrides(cfg, nil); got == nil || len(got) != 0 {
		t.Errorf("no overrides: %#v, want an empty list (JSON [])", got)
	}
}
