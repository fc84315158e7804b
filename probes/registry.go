package probes

// New returns the table of probe kinds, keyed by configs.Check.Kind. Only
// "dns" exists so far; icmp, tcp, http, https and udp will join it. Each call
// returns a fresh map that the caller may extend (for example with a fake
// kind in tests).
func New() map[string]Func {
	return map[string]Func{
		"dns": DNS,
	}
}
