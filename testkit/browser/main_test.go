package browser

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
