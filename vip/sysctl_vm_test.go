//go:build ipvsvm

package vip_test

import (
	"os"
	"strings"
	"testing"

	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// TestVMExpireNodestConn checks that SetExpireNodestConn writes the
// kernel's sysctl, read back from /proc.
func TestVMExpireNodestConn(t *testing.T) {
	ipvsvm.Require(t)
	const path = "/proc/sys/net/ipv4/vs/expire_nodest_conn"
	for _, tc := range []struct {
		name string
		on   bool
		want string
	}{
		{"on", true, "1"},
		{"off", false, "0"},
		{"on again", true, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := vip.SetExpireNodestConn(tc.on); err != nil {
				t.Fatalf("SetExpireNodestConn(%v): %v", tc.on, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != tc.want {
				t.Errorf("%s = %q, want %q", path, got, tc.want)
			}
		})
	}
}
