package report

import (
	"fmt"
	"time"

	"lbdns/control"
)

// FleetEtcdLost tells that the node cannot reach the fleet's etcd: it
// keeps serving the intent it applied last (at revision rev, from
// source) and refuses every intent change until etcd is back.
func (j *Journal) FleetEtcdLost(cause error, rev uint64, source string) {
	j.log.Error("fleet: etcd UNREACHABLE: serving the intent applied last; every intent change is refused until etcd is back",
		"intent_revision", rev, "intent_source", source, "err", cause)
	j.event(control.Event{Kind: control.EventFleet, Subject: "etcd", Error: true,
		Message: fmt.Sprintf("etcd unreachable: serving the intent applied last (revision %d, %s); intent changes refused until it is back: %v", rev, source, cause)})
}

// FleetEtcdBack tells that the node reaches the fleet's etcd again after
// being cut off for lost; it reads the intent whole.
func (j *Journal) FleetEtcdBack(lost time.Duration) {
	j.log.Info("fleet: etcd reachable again; reading the intent whole", "after", lost.Round(time.Millisecond).String())
	j.event(control.Event{Kind: control.EventFleet, Subject: "etcd",
		Message: fmt.Sprintf("etcd reachable again after %s; reading the intent whole", lost.Round(time.Millisecond))})
}

// FleetStartedWithoutEtcd tells that the daemon started while etcd could
// not be reached, serving its configuration with the local copy of the
// intent it last applied (at revision rev; source says whether there was
// one).
func (j *Journal) FleetStartedWithoutEtcd(cause error, rev uint64, source string) {
	j.log.Error("fleet: started WITHOUT etcd: serving the configuration and the local copy of the intent applied last; intent changes refused until etcd is reachable",
		"intent_revision", rev, "intent_source", source, "err", cause)
	j.event(control.Event{Kind: control.EventFleet, Subject: "etcd", Error: true,
		Message: fmt.Sprintf("started without etcd: serving the configuration and the intent of the %s (revision %d); intent changes refused until etcd is reachable: %v", source, rev, cause)})
}

// FleetMembership tells that nodes joined or left this node's fleet view
// (a heartbeat lease appeared, or expired or was revoked: a node stopped,
// died or was cut off from etcd for longer than its lease).
func (j *Journal) FleetMembership(joined, left []string) {
	for _, n := range joined {
		j.log.Info("fleet: a node joined the fleet view", "node", n)
		j.event(control.Event{Kind: control.EventFleet, Subject: "node " + n, Message: "joined the fleet view (its heartbeat is alive)"})
	}
	for _, n := range left {
		j.log.Warn("fleet: a node left the fleet view", "node", n)
		j.event(control.Event{Kind: control.EventFleet, Subject: "node " + n, Error: true,
			Message: "left the fleet view (its heartbeat lease is gone: stopped, dead, or cut off from etcd)"})
	}
}
