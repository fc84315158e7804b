package resolvers

import (
	"maps"
	"testing"

	"lbdns/health"
)

func TestPlanHealthyResolvers(t *testing.T) {
	p := Plan{Pools: []PoolStatus{
		{Name: "one", Members: []Member{
			{Name: "up", State: health.Up, Fresh: true},
			{Name: "stale", State: health.Up},
			{Name: "down", State: health.Down, Fresh: true},
			{Name: "disabled", State: health.Up, Fresh: true, Override: Disable},
			{Name: "drained", State: health.Up, Fresh: true, Override: Drain},
			{Name: "split", State: health.Up, Fresh: true, Override: Disable},
		}},
		{Name: "two", Members: []Member{
			{Name: "split", State: health.Up, Fresh: true},
		}},
	}}
	want := map[string]bool{"up": true, "drained": true, "split": true}
	if got := p.HealthyResolvers(); !maps.Equal(got, want) {
		t.Errorf("HealthyResolvers() = %v, want %v", got, want)
	}
	if got := (Plan{}).HealthyResolvers(); got == nil || len(got) != 0 {
		t.Errorf("empty plan: HealthyResolvers() = %#v, want an empty map", got)
	}
}
