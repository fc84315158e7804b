package control

import "time"

// etcdLostView is the banner of a node that cannot reach the fleet's
// etcd.
type etcdLostView struct {
	Since    timeCell
	Revision uint64
	Source   string
	Error    string
}

// buildEtcdLost is the banner of f at now, nil while etcd is reachable
// or without [fleet].
func buildEtcdLost(f *FleetEtcd, now time.Time) *etcdLostView {
	if f == nil || f.Reachable {
		return nil
	}
	return &etcdLostView{Since: cell(f.Since, now), Revision: f.IntentRevision, Source: f.IntentSource, Error: f.Error}
}
