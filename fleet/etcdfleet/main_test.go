package etcdfleet

import (
	"os"
	"testing"

	"lbdns/testkit/etcdtest"
	"lbdns/testkit/leakcheck"
)

// etcd is the cluster the package's tests share; each test has its own
// user, role and key prefix.
var etcd etcdtest.Shared

func TestMain(m *testing.M) {
	os.Exit(etcd.Run(func() int { return leakcheck.Run(m, "etcdfleet.(*Store)", "etcdfleet.(*Heartbeater)") }))
}
