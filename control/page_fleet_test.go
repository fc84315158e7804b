package control

import (
	"strings"
	"testing"
	"time"
)

// TestPageEtcdUnreachable: a node in a fleet that cannot reach etcd
// shows a critical banner with since when, the intent it serves and
// why; reachable, or without [fleet], there is no banner.
func TestPageEtcdUnreachable(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	for _, f := range []*FleetEtcd{nil, {Reachable: true, Since: now.Add(-time.Hour), IntentRevision: 9, IntentSource: IntentFromEtcd}} {
		st.Fleet = f
		if _, page := renderPage(t, st, now, 0); strings.Contains(page, "etcd-unreachable") {
			t.Errorf("fleet %+v: the page shows the etcd banner", f)
		}
	}
	st.Fleet = &FleetEtcd{Since: now.Add(-90 * time.Second), Error: "context deadline exceeded", IntentRevision: 12, IntentSource: IntentFromLocalCopy}
	_, page := renderPage(t, st, now, 0)
	contains(t, "page", page, `<div class="banner crit" id="etcd-unreachable">FLEET: etcd UNREACHABLE since 1m30s ago — serving the intent applied last (revision 12, from local copy); every intent change is refused until etcd is back (context deadline exceeded)</div>`)
}
