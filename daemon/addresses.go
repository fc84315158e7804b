package daemon

import (
	"os"
	"path/filepath"

	"lbdns/vip"
)

// vipAddresses is the daemon's record of the VIP addresses it put on
// interfaces itself (vip.OwnedAddresses), kept in vip.AddressesFile in the
// state directory: the addresses it takes off again when their VIP leaves
// the configuration, and the only ones. The loop owns it.
type vipAddresses struct {
	path  string
	owned *vip.OwnedAddresses
	// readOnly is set when the file could not be read and could not be
	// moved aside either: it is then never written, so that what it
	// holds stays for the operator to see.
	readOnly bool
}

// ensureAddresses brings the VIP addresses on their interfaces to the
// running configuration (vip.SyncAddresses): it puts each VIP's address on
// its interface, recording those it added, and takes off the recorded ones
// no VIP asks for any more (a VIP removed, or its address or interface
// changed; at the start, also while the daemon was down). An address that
// was on its interface before the daemon put it there is never recorded,
// so never removed. A stop leaves every address in place, as it leaves the
// IPVS table. Not in dry-run, nor with a test's client. The first call
// (at New) loads the record.
func (d *Daemon) ensureAddresses() {
	if d.dryRun || d.opts.Client != nil {
		return
	}
	if d.addrs == nil {
		d.addrs = d.loadAddresses(filepath.Join(d.cfg.Daemon.StateDir, vip.AddressesFile))
	}
	rep, err := vip.SyncAddresses(d.addrs.owned, d.cfg.VIPs)
	for _, v := range rep.Added {
		d.log.Info("VIP address added", "vip", v.Name, "addr", v.Addr.String(), "interface", v.Interface)
	}
	for _, a := range rep.Removed {
		d.log.Info("VIP address removed: no VIP has it any more", "addr", a.Addr.String(), "interface", a.Interface)
	}
	for _, a := range rep.Gone {
		d.log.Info("VIP address no VIP has any more was already gone; forgotten", "addr", a.Addr.String(), "interface", a.Interface)
	}
	if err != nil {
		d.log.Error("cannot bring the VIP addresses on their interfaces to the configuration; retried at the next resync", "err", err)
	}
	if d.addrs.readOnly {
		return
	}
	// Saved after the change, never before: a crash in between leaves an
	// added address unrecorded (left in place), never an operator's
	// address recorded (removed).
	if err := d.addrs.owned.Save(d.addrs.path); err != nil {
		d.log.Warn("cannot save the record of the VIP addresses the daemon added (retried unless only the directory sync failed)", "path", d.addrs.path, "err", err)
	}
}

// loadAddresses reads the record of the VIP addresses at path. A record
// that cannot be read is not guessed at: the daemon starts from an empty
// one (removing none of the addresses the file may name), and moves the
// file aside as PATH.bad-TIME for the operator, so that the next save
// does not destroy it; when it cannot be moved, it is never written.
func (d *Daemon) loadAddresses(path string) *vipAddresses {
	owned, err := vip.LoadOwnedAddresses(path)
	a := &vipAddresses{path: path, owned: owned}
	if err == nil {
		return a
	}
	kept := path + ".bad-" + d.now().UTC().Format("20060102T150405Z")
	if rerr := os.Rename(path, kept); rerr != nil {
		a.readOnly = true
		d.log.Warn("cannot read the record of the VIP addresses the daemon added, nor move it aside: removing none of them, and not writing the record until a restart", "path", path, "err", err, "rename_err", rerr)
		return a
	}
	d.log.Warn("cannot read the record of the VIP addresses the daemon added: removing none of the addresses it names; moved aside", "path", path, "kept", kept, "err", err)
	return a
}
