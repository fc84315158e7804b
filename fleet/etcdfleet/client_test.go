package etcdfleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/configs"
	"lbdns/testkit/etcdtest"
)

// fleetFor makes a user with a role limited to a prefix of its own and
// returns node name's [fleet] with it.
func fleetFor(t *testing.T, c *etcdtest.Cluster, user, name, loc string) *configs.Fleet {
	t.Helper()
	prefix := fmt.Sprintf("/%s-%d/", user, time.Now().UnixNano()) // new for every run (go test -count)
	cr, err := c.User(user, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return c.Fleet(cr, prefix, name, loc, 2*time.Second)
}

func connect(t *testing.T, f *configs.Fleet) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := Connect(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestConnectRefused: a certificate from another CA, a role without the
// prefix and no member listening are refused, each with an error that
// says what to fix.
func TestConnectRefused(t *testing.T) {
	c := etcd.Cluster(t)
	good := fleetFor(t, c, "refused", "lb1", "dc1")
	other, err := etcdtest.NewCA(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := other.Issue("lb1", "refused")
	if err != nil {
		t.Fatal(err)
	}
	wrongCert := *good
	wrongCert.CertFile, wrongCert.KeyFile = cert, key
	wrongCert.DialTimeout.Duration = 3 * time.Second
	otherPrefix := *good
	otherPrefix.Prefix = "/someone-else/"
	nobody := *good
	nobody.Endpoints = []string{"127.0.0.1:1"}
	nobody.DialTimeout.Duration = time.Second
	for _, tc := range []struct {
		name string
		f    *configs.Fleet
		want string
	}{
		{"certificate of another CA", &wrongCert, "etcd refused the TLS connection"},
		{"prefix outside the role", &otherPrefix, "etcd refuses this node the prefix /someone-else/"},
		{"no member", &nobody, "no etcd member of 127.0.0.1:1 answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cli, err := Connect(ctx, tc.f)
			if err == nil {
				cli.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Connect: %v\nwant it to say %q", err, tc.want)
			}
			t.Logf("refused as expected: %v", err)
		})
	}
	connect(t, good)
}

// TestServerVersion: the test cluster runs etcd 3.5 or later.
func TestServerVersion(t *testing.T) {
	c := etcd.Cluster(t)
	cli := connect(t, fleetFor(t, c, "version", "lb1", "dc1"))
	v, old, err := ServerVersion(ctxT(t), cli)
	if err != nil || old || !strings.HasPrefix(v, "3.") {
		t.Fatalf("ServerVersion = %q, old %v, %v", v, old, err)
	}
	t.Logf("etcd %s", v)
}
