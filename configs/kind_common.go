package configs

import "fmt"

// needDNSCheck reports, at key (a [[pool]]'s check key), a resolver pool
// whose check profile exists but is not of kind "dns": resolver pools are
// judged by DNS probes; the other kinds are for GSLB members.
func (d *decoder) needDNSCheck(key string, k *Check) {
	if k == nil || k.Kind == "dns" || !oneOf(k.Kind, CheckKinds()) {
		return
	}
	d.p.add(key, k.Name, fmt.Sprintf("resolver pools need a dns check; %s checks are for GSLB members", k.Kind))
}
