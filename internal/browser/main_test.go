package browser

import (
	"testing"

	"lbdns/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
