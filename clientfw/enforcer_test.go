package clientfw

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPermissionError: a refusal of the kernel (EPERM: no CAP_NET_ADMIN)
// says what lbdnsd needs and that the actions are kept, and keeps its
// cause.
func TestPermissionError(t *testing.T) {
	e := New(Options{Table: "lbdns"})
	err := e.wrap("write table", fmt.Errorf("netlink receive: %w", unix.EPERM))
	if !errors.Is(err, ErrPermission) || !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") ||
		!strings.Contains(err.Error(), "kept in the intent but not enforced") || !strings.Contains(err.Error(), "table inet lbdns: write table") {
		t.Errorf("wrap(EPERM) = %v", err)
	}
	if err := e.wrap("read table", unix.ENOMEM); errors.Is(err, ErrPermission) || !strings.HasPrefix(err.Error(), "clientfw: table inet lbdns: read table") {
		t.Errorf("wrap(ENOMEM) = %v", err)
	}
}
