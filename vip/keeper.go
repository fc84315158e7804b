package vip

import (
	"log/slog"
	"os"
	"time"

	"lbdns/configs"
)

// AddressKeeper is lbdnsd's record of the VIP addresses it put on
// interfaces itself (OwnedAddresses), kept in AddressesFile in the state
// directory: the addresses it takes off again when their VIP leaves the
// configuration, and the only ones. One goroutine uses it.
type AddressKeeper struct {
	path  string
	owned *OwnedAddresses
	log   *slog.Logger
	// readOnly is set when the file could not be read and could not be
	// moved aside either: it is then never written, so that what it
	// holds stays for the operator to see.
	readOnly bool
}

// NewAddressKeeper reads the record of the VIP addresses at path. A
// record that cannot be read is not guessed at: the keeper starts from
// an empty one (removing none of the addresses the file may name), and
// moves the file aside as PATH.bad-TIME (now's) for the operator, so
// that the next save does not destroy it; when it cannot be moved, it is
// never written.
func NewAddressKeeper(path string, log *slog.Logger, now time.Time) *AddressKeeper {
	owned, err := LoadOwnedAddresses(path)
	a := &AddressKeeper{path: path, owned: owned, log: log}
	if err == nil {
		return a
	}
	kept := path + ".bad-" + now.UTC().Format("20060102T150405Z")
	if rerr := os.Rename(path, kept); rerr != nil {
		a.readOnly = true
		log.Warn("cannot read the record of the VIP addresses the daemon added, nor move it aside: removing none of them, and not writing the record until a restart", "path", path, "err", err, "rename_err", rerr)
		return a
	}
	log.Warn("cannot read the record of the VIP addresses the daemon added: removing none of the addresses it names; moved aside", "path", path, "kept", kept, "err", err)
	return a
}

// Ensure brings the VIP addresses on their interfaces to vips
// (SyncAddresses): it puts each VIP's address on its interface,
// recording those it added, and takes off the recorded ones no VIP asks
// for any more (a VIP removed, or its address or interface changed; at
// the start, also while the daemon was down). An address that was on its
// interface before lbdnsd put it there is never recorded, so never
// removed. A stop leaves every address in place, as it leaves the IPVS
// table.
func (a *AddressKeeper) Ensure(vips []configs.VIP) {
	rep, err := SyncAddresses(a.owned, vips)
	for _, v := range rep.Added {
		a.log.Info("VIP address added", "vip", v.Name, "addr", v.Addr.String(), "interface", v.Interface)
	}
	for _, x := range rep.Removed {
		a.log.Info("VIP address removed: no VIP has it any more", "addr", x.Addr.String(), "interface", x.Interface)
	}
	for _, x := range rep.Gone {
		a.log.Info("VIP address no VIP has any more was already gone; forgotten", "addr", x.Addr.String(), "interface", x.Interface)
	}
	if err != nil {
		a.log.Error("cannot bring the VIP addresses on their interfaces to the configuration; retried at the next resync", "err", err)
	}
	if a.readOnly {
		return
	}
	// Saved after the change, never before: a crash in between leaves an
	// added address unrecorded (left in place), never an operator's
	// address recorded (removed).
	if err := a.owned.Save(a.path); err != nil {
		a.log.Warn("cannot save the record of the VIP addresses the daemon added (retried unless only the directory sync failed)", "path", a.path, "err", err)
	}
}
