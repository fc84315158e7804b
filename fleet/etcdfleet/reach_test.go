package etcdfleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// TestOpenUnreachable: with no member answering, Open returns a client
// that keeps reconnecting with an *UnreachableError saying so, and
// Connect refuses; once a member is back, the client Open returned
// reads without being made again.
func TestOpenUnreachable(t *testing.T) {
	c := etcd.Cluster(t)
	f := fleetFor(t, c, "reach", "a", "dc1")
	f.Endpoints = c.Endpoints[:1]
	f.DialTimeout.Duration = time.Second
	c.StopMember(0)
	stopped := true
	defer func() { // the shared cluster, whole again for the next test
		if stopped {
			c.StartMember(0)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := Open(ctx, f)
	var ue *UnreachableError
	if !errors.As(err, &ue) || cli == nil || !IsUnreachable(ue.Err) {
		t.Fatalf("Open with its member down: %v (client %v), want an UnreachableError with a client", err, cli != nil)
	}
	defer cli.Close()
	t.Logf("unreachable: %v", err)
	if cc, err := Connect(ctx, f); cc != nil || !errors.As(err, &ue) {
		t.Fatalf("Connect with its member down: %v (client %v), want an UnreachableError and no client", err, cc != nil)
	}
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	stopped = false
	poll.Until(t, 20*time.Second, "the client reading once its member is back", func() (bool, string) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		_, err := cli.Get(rctx, f.Prefix)
		return err == nil, ""
	})
	if IsUnreachable(nil) || IsUnreachable(errors.New("fleet: something else")) {
		t.Error("IsUnreachable holds for nil or an unrelated error")
	}
}
