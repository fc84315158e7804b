package clientfw

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/testkit/promgolden"
)

func TestMetrics(t *testing.T) {
	enf := New(Options{Table: "lbdns"})
	enf.st.Errors, enf.st.Replaced = 2, 5
	reg := prometheus.NewRegistry()
	set := time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC) // 1796135400
	reg.MustRegister(NewMetrics(enf, func() InForce { return InForce{Block: 1, Limit: 3, OldestBlock: set} }))
	want := `# HELP lbdns_client_action_oldest_set_timestamp_seconds Unix time the oldest client action in force of the action was set; absent while none is in force.
# TYPE lbdns_client_action_oldest_set_timestamp_seconds gauge
lbdns_client_action_oldest_set_timestamp_seconds{action="block"} 1.7961354e+09
# HELP lbdns_client_actions Client actions in force (lbctl block, limit), by action.
# TYPE lbdns_client_actions gauge
lbdns_client_actions{action="block"} 1
lbdns_client_actions{action="limit"} 3
# HELP lbdns_client_actions_enforced 1 while the kernel's nftables table holds the client actions in force, else 0.
# TYPE lbdns_client_actions_enforced gauge
lbdns_client_actions_enforced 0
# HELP lbdns_client_enforce_errors_total Reconciles of the client actions' nftables table that failed.
# TYPE lbdns_client_enforce_errors_total counter
lbdns_client_enforce_errors_total 2
# HELP lbdns_client_table_writes_total Times the client actions' nftables table was created, replaced or removed.
# TYPE lbdns_client_table_writes_total counter
lbdns_client_table_writes_total 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	promgolden.Check(t, "the client actions", promgolden.Lines(t, reg))
}
