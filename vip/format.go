package vip

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// FormatTable renders t like `ipvsadm -Ln`, after a header line "# header":
// the services in Compare order, each followed by its destinations in
// address order with their forwarding method and weight.
func FormatTable(t Table, header string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", header)
	fmt.Fprintf(&b, "Prot LocalAddress:Port Scheduler\n  -> RemoteAddress:Port Forward Weight\n")
	for _, k := range t.Keys() {
		s := t[k]
		fmt.Fprintf(&b, "%s  %s %s\n", strings.ToUpper(k.Proto.String()), netip.AddrPortFrom(k.Addr, k.Port), s.Scheduler)
		addrs := make([]netip.AddrPort, 0, len(s.Dests))
		for a := range s.Dests {
			addrs = append(addrs, a)
		}
		slices.SortFunc(addrs, netip.AddrPort.Compare)
		for _, a := range addrs {
			dst := s.Dests[a]
			fmt.Fprintf(&b, "  -> %-28s %-6s %d\n", a, dst.Forwarding, dst.Weight)
		}
	}
	return b.String()
}
