package clients

import (
	"net/netip"
	"testing"
	"time"

	"lbdns/clientfw"
	"lbdns/intent"
)

// TestInForce: the metrics count blocks and limits apart, and take the
// oldest set time of each, an action without one left out.
func TestInForce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := netip.MustParsePrefix("192.0.2.7/32")
	for _, tc := range []struct {
		name    string
		actions []intent.ClientAction
		want    clientfw.InForce
	}{
		{"none", nil, clientfw.InForce{}},
		{"oldest of each", []intent.ClientAction{
			{Client: p, Action: intent.ActionBlock, Set: t0.Add(time.Hour)},
			{Client: p, Action: intent.ActionBlock, Set: t0},
			{Client: p, Action: intent.ActionBlock, Set: t0.Add(2 * time.Hour)},
			{Client: p, Action: intent.ActionLimit, Rate: 5, Set: t0.Add(3 * time.Hour)},
		}, clientfw.InForce{Block: 3, Limit: 1, OldestBlock: t0, OldestLimit: t0.Add(3 * time.Hour)}},
		{"no set time", []intent.ClientAction{
			{Client: p, Action: intent.ActionLimit, Rate: 5},
			{Client: p, Action: intent.ActionLimit, Rate: 5, Set: t0},
		}, clientfw.InForce{Limit: 2, OldestLimit: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inForce(tc.actions); got != tc.want {
				t.Errorf("inForce = %+v, want %+v", got, tc.want)
			}
		})
	}
}
