package etcdfleet

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"lbdns/fleet"
)

// TestWatchNodes: the watched view has every node at once, then what a
// node publishes (its announcements), a node joining and a node leaving,
// each soon after it happened, without waiting for the resync.
func TestWatchNodes(t *testing.T) {
	tf := newFleet(t, "watchnodes")
	ha, hbA := tf.beat("a", 1, 0)
	defer ha.Close()
	ctx, cancel := context.WithCancel(context.Background())
	views := WatchNodes(ctx, tf.c.Root(), tf.f.Prefix, WatchOptions{Resync: time.Hour})
	defer func() {
		cancel()
		for range views {
		}
	}()
	var last []fleet.Node
	wait := func(what string, ok func([]fleet.Node) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for !ok(last) {
			select {
			case v := <-views:
				last = v
			case <-deadline:
				t.Fatalf("%s: not seen in 10s; last view %+v", what, last)
			}
		}
	}
	wait("a alone", func(n []fleet.Node) bool { return names(n) == "[a]" })
	p := netip.MustParsePrefix("192.0.2.53/32")
	hbA.Announced = []fleet.Announcement{{Prefix: p, Grade: fleet.GradeHeld}}
	hbA.Drained = true
	ha.Publish(hbA)
	wait("a's announcement", func(n []fleet.Node) bool {
		return len(n) == 1 && n[0].Drained && len(n[0].Announced) == 1 && n[0].Announced[0] == hbA.Announced[0]
	})
	hb, _ := tf.beat("b", 1, 0)
	wait("b joined", func(n []fleet.Node) bool { return names(n) == "[a b]" })
	hb.Close()
	wait("b left", func(n []fleet.Node) bool { return names(n) == "[a]" })
}
