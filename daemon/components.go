package daemon

import (
	"errors"

	"lbdns/configs"
)

// component is one feature's part of a reload: every component checks a
// new configuration before any of them applies it, so that a reload
// any one refuses changes nothing in any.
type component interface {
	// Check says whether the component can take cfg (nil: it can).
	Check(cfg *configs.Config) error
	// Apply makes cfg the component's configuration.
	Apply(cfg *configs.Config)
}

// components are the features a start and a reload check, and a reload
// applies, in this order. The resolver pools and their IPVS table are
// the daemon's own (targets, install); the fleet, the client actions,
// the route announcer and dnstap follow Hub.Config or keep their
// restart-only settings.
func (d *Daemon) components() []component {
	return []component{d.gslb, d.flood, d.pf}
}

// check asks every component whether it can take cfg: the first refusal
// refuses the whole configuration.
func (d *Daemon) check(cfg *configs.Config) error {
	var errs []error
	for _, c := range d.components() {
		if err := c.Check(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
