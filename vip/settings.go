package vip

import (
	"errors"
	"fmt"
	"time"

	"lbdns/configs"
)

// ApplySettings applies the host-wide IPVS settings of s through kc:
// expire_nodest_conn (on unless s turns it off) and, when s sets one, the
// UDP connection timeout. It tries both and returns both failures joined,
// nil when both were applied.
func ApplySettings(kc *KernelClient, s configs.IPVS) error {
	return applySettings(s, SetExpireNodestConn, func(d time.Duration) error { return SetUDPTimeout(kc, d) })
}

// applySettings is ApplySettings over the two setters.
func applySettings(s configs.IPVS, setExpire func(on bool) error, setUDPTimeout func(time.Duration) error) error {
	var errs []error
	on := s.ExpireNodestConn == nil || *s.ExpireNodestConn
	if err := setExpire(on); err != nil {
		errs = append(errs, fmt.Errorf("cannot set expire_nodest_conn: %w", err))
	}
	if t := s.UDPTimeout.Duration; t > 0 {
		if err := setUDPTimeout(t); err != nil {
			errs = append(errs, fmt.Errorf("cannot set IPVS udp timeout: %w", err))
		}
	}
	return errors.Join(errs...)
}
