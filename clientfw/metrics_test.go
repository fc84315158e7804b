package clientfw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/intent"
	"lbdns/testkit/promgolden"
)

func TestMetrics(t *testing.T) {
	enf := New(Options{Table: "lbdns"})
	enf.st.Errors, enf.st.Replaced = 2, 5
	enf.st.Fill = []SetFill{{Set: "block4", Elements: 1}, {Set: "limit4_50", Elements: 2}, {Set: "meter4_50", Elements: 52429, Capacity: 65535}}
	enf.held = []intent.ClientAction{{Client: netip.MustParsePrefix("192.0.2.9/32"), Action: intent.ActionBlock, Until: time.Now().Add(time.Hour)}}
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
# HELP lbdns_client_actions_unremoved Client actions ended (lbctl unblock) whose kernel elements could not be removed: the kernel may still drop or limit their clients until the elements time out.
# TYPE lbdns_client_actions_unremoved gauge
lbdns_client_actions_unremoved 1
# HELP lbdns_client_actions_enforced 1 while the kernel's nftables table holds the client actions in force, else 0.
# TYPE lbdns_client_actions_enforced gauge
lbdns_client_actions_enforced 0
# HELP lbdns_client_enforce_errors_total Reconciles of the client actions' nftables table that failed.
# TYPE lbdns_client_enforce_errors_total counter
lbdns_client_enforce_errors_total 2
# HELP lbdns_client_set_capacity Most elements a set of the client actions' nftables table takes (the meters; a full meter drops every new source of its limited clients).
# TYPE lbdns_client_set_capacity gauge
lbdns_client_set_capacity{set="meter4_50"} 65535
# HELP lbdns_client_set_elements Elements in each set of the client actions' nftables table when last counted (a meter: the source addresses it tracks).
# TYPE lbdns_client_set_elements gauge
lbdns_client_set_elements{set="block4"} 1
lbdns_client_set_elements{set="limit4_50"} 2
lbdns_client_set_elements{set="meter4_50"} 52429
# HELP lbdns_client_table_writes_total Times the client actions' nftables table was created, replaced or removed.
# TYPE lbdns_client_table_writes_total counter
lbdns_client_table_writes_total 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	promgolden.Check(t, "the client actions", promgolden.Lines(t, reg))
}
