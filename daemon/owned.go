package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"lbdns/internal/atomicfile"
	"lbdns/vip"
)

// ownedFile keeps the IPVS services the daemon owns, so that a service of
// a VIP removed from the config while the daemon was down is still
// recognised as the daemon's own, and deleted, after a restart.
const ownedFile = "ipvs-owned.json"

type ownedState struct {
	Version  int      `json:"version"`
	Services []string `json:"services"`
}

// loadOwned adds the persisted owned services to d.owned. A missing file is
// normal (first start); an unreadable one is reported and ignored: the
// worst outcome is an orphaned service left in the kernel, never a deleted
// one.
func (d *Daemon) loadOwned() {
	path := filepath.Join(d.cfg.Daemon.StateDir, ownedFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		d.log.Warn("cannot read owned IPVS services; services of removed VIPs will be left alone", "path", path, "err", err)
		return
	}
	var st ownedState
	if err := json.Unmarshal(b, &st); err != nil {
		d.log.Warn("cannot parse owned IPVS services; services of removed VIPs will be left alone", "path", path, "err", err)
		return
	}
	for _, s := range st.Services {
		k, err := parseServiceKey(s)
		if err != nil {
			d.log.Warn("ignoring owned IPVS service", "path", path, "service", s, "err", err)
			continue
		}
		d.owned[k] = true
	}
	d.ownedSaved = ownedList(d.owned)
}

// pruneOwned forgets owned services that are neither configured nor in the
// kernel any more, and persists the set when it changed. It runs after
// every successful reconcile, so it reads the cached view key by key and
// writes only on a change.
func (d *Daemon) pruneOwned(configured vip.Table) {
	for k := range d.owned {
		if _, want := configured[k]; !want && !d.rec.Has(k) {
			delete(d.owned, k)
			d.ownedChanged = true
		}
	}
	if !d.ownedChanged {
		return
	}
	list := ownedList(d.owned)
	if slices.Equal(list, d.ownedSaved) {
		d.ownedChanged = false
		return
	}
	b, err := json.MarshalIndent(ownedState{Version: 1, Services: list}, "", "  ")
	if err != nil {
		d.log.Warn("cannot encode owned IPVS services", "err", err)
		return
	}
	path := filepath.Join(d.cfg.Daemon.StateDir, ownedFile)
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		var ds *atomicfile.DirSyncError
		if !errors.As(err, &ds) {
			d.log.Warn("cannot save owned IPVS services; will retry", "path", path, "err", err)
			return
		}
		// The file is in place; only its durability is in doubt.
		d.log.Warn("owned IPVS services saved but the state directory could not be synced", "path", path, "err", err)
	}
	d.ownedSaved, d.ownedChanged = list, false
}

func ownedList(m map[vip.ServiceKey]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// parseServiceKey parses the form of vip.ServiceKey.String: "udp/ADDR:PORT".
func parseServiceKey(s string) (vip.ServiceKey, error) {
	proto, ap, ok := strings.Cut(s, "/")
	if !ok {
		return vip.ServiceKey{}, fmt.Errorf("want PROTO/ADDR:PORT, got %q", s)
	}
	a, err := netip.ParseAddrPort(ap)
	if err != nil {
		return vip.ServiceKey{}, err
	}
	k := vip.ServiceKey{Addr: a.Addr(), Port: a.Port()}
	switch proto {
	case "udp":
		k.Proto = vip.UDP
	case "tcp":
		k.Proto = vip.TCP
	default:
		return vip.ServiceKey{}, fmt.Errorf("unknown protocol %q", proto)
	}
	return k, nil
}
