package etcdtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

var shared Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m.Run)) }

// TestUserLimitedToPrefix: a user reads and writes under its prefix and
// is refused anywhere else.
func TestUserLimitedToPrefix(t *testing.T) {
	c := shared.Cluster(t)
	cr, err := c.User("alice", "/a/")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := c.client(cr.CertFile, cr.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/a/k", "v"); err != nil {
		t.Fatalf("put under the prefix: %v", err)
	}
	if _, err := cli.Get(ctx, "/b/k"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("get outside the prefix: %v, want permission denied", err)
	}
	if _, err := cli.Put(ctx, "/ab", "v"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("put beside the prefix: %v, want permission denied", err)
	}
}
