package daemon

import (
	"lbdns/fleet/etcdfleet"
	"lbdns/intent"
	"lbdns/internal/atomicfile"
	"lbdns/responder"
	"lbdns/vip"
)

// stateFiles returns the files lbdnsd writes in daemon.state_dir, each
// through atomicfile.Write.
func stateFiles() []string {
	return []string{intent.FileName, vip.OwnedFile, vip.AddressesFile, vip.DryRunFileName, responder.SerialFile, etcdfleet.CopyFile}
}

// removeStateTemps removes the temporary files of lbdnsd's own state files
// that a write cut short (kill -9, a power loss) left in dir, logging each
// one; a failure is logged and the start goes on.
func (d *Daemon) removeStateTemps(dir string) {
	removed, err := atomicfile.RemoveTemps(dir, stateFiles()...)
	for _, p := range removed {
		d.log.Info("removed a temporary file left by an interrupted write", "path", p)
	}
	if err != nil {
		d.log.Warn("cannot remove temporary files left by interrupted writes", "dir", dir, "err", err)
	}
}
