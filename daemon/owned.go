package daemon

import (
	"errors"
	"path/filepath"

	"lbdns/internal/atomicfile"
	"lbdns/vip"
)

// ownedFile keeps the IPVS services the daemon owns (a vip.OwnedSet), so
// that a service of a VIP removed from the config while the daemon was
// down is still recognised as the daemon's own, and deleted, after a
// restart.
const ownedFile = vip.OwnedFile

// loadOwned adds the persisted owned services to d.owned. A missing file is
// normal (first start); an unreadable one is reported and ignored: the
// worst outcome is an orphaned service left in the kernel, never a deleted
// one.
func (d *Daemon) loadOwned() {
	path := filepath.Join(d.cfg.Daemon.StateDir, ownedFile)
	set, err := vip.LoadOwned(path)
	if err != nil {
		d.log.Warn("cannot load all owned IPVS services; services of removed VIPs may be left alone", "path", path, "err", err)
	}
	for _, k := range d.owned.Keys() { // the configured ones, from install
		set.Add(k)
	}
	d.owned = set
}

// pruneOwned forgets owned services that are neither configured nor in the
// kernel any more, and persists the set when it changed. It runs after
// every successful reconcile, so it reads the cached view key by key and
// writes only on a change.
func (d *Daemon) pruneOwned(configured vip.Table) {
	d.owned.Prune(func(k vip.ServiceKey) bool {
		_, want := configured[k]
		return want || d.rec.Has(k)
	})
	path := filepath.Join(d.cfg.Daemon.StateDir, ownedFile)
	if err := d.owned.Save(path); err != nil {
		var ds *atomicfile.DirSyncError
		if !errors.As(err, &ds) {
			d.log.Warn("cannot save owned IPVS services; will retry", "path", path, "err", err)
			return
		}
		// The file is in place; only its durability is in doubt.
		d.log.Warn("owned IPVS services saved but the state directory could not be synced", "path", path, "err", err)
	}
}
