package configs

import (
	"encoding/hex"
	"strings"
)

// UDPCheck is the settings of a check of kind "udp" ([check.NAME.udp]): a
// datagram sent to the target and a reply expected. A reply proves the
// service answers; an ICMP port unreachable proves it does not; silence
// proves nothing (a firewall or a service that never replies looks the
// same) but is treated as down (see CONFIGURATION.md).
//
// Every field takes part in ProbeIdentity.
type UDPCheck struct {
	// Port to send to. Default 0: the target's port.
	Port int `toml:"port"`
	// Payload is the datagram sent, as text (TOML escapes give control
	// characters). At most one of Payload and PayloadHex; default: an
	// empty datagram.
	Payload string `toml:"payload"`
	// PayloadHex is the datagram sent, in hexadecimal ("0a1b...";
	// spaces and colons between bytes are allowed).
	PayloadHex string `toml:"payload_hex"`
	// Expect, when set, is a regexp that the reply must match. Default:
	// any reply.
	Expect string `toml:"expect"`
}

// PayloadBytes returns the datagram u sends: Payload, or PayloadHex decoded.
func (u *UDPCheck) PayloadBytes() ([]byte, error) {
	if u.PayloadHex == "" {
		return []byte(u.Payload), nil
	}
	clean := strings.NewReplacer(" ", "", ":", "", "\t", "", "\n", "").Replace(u.PayloadHex)
	b, err := hex.DecodeString(clean)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// udpDefaults gives a check of kind "udp" without a sub-table its settings
// (an empty datagram, any reply). m is the [check.NAME] table as decoded
// generically.
func udpDefaults(k *Check, _ map[string]any) {
	if k.Kind == "udp" && k.UDP == nil {
		k.UDP = &UDPCheck{}
	}
}

// validateUDP checks the settings of a check of kind "udp" (the [check.NAME]
// table at key path base, raw as decoded generically).
func (d *decoder) validateUDP(base string, k *Check, raw map[string]any) {
	u := k.UDP
	if u == nil {
		return
	}
	base = joinKey(base, "udp")
	d.validatePort(base, u.Port)
	if subHas(raw, "udp", "expect") {
		d.validateExpect(base, u.Expect)
	}
	hasHex := subHas(raw, "udp", "payload_hex")
	switch {
	case hasHex && subHas(raw, "udp", "payload"):
		d.p.add(joinKey(base, "payload_hex"), u.PayloadHex, "set either payload or payload_hex, not both")
	case hasHex && u.PayloadHex == "":
		d.p.add(joinKey(base, "payload_hex"), "", "must not be empty (leave the key out instead)")
	case hasHex:
		if _, err := u.PayloadBytes(); err != nil {
			d.p.add(joinKey(base, "payload_hex"), u.PayloadHex, "not hexadecimal bytes: "+strings.TrimPrefix(err.Error(), "encoding/hex: "))
		}
	}
	if p, err := u.PayloadBytes(); err == nil && len(p) > MaxUDPPayload {
		d.p.add(joinKey(base, "payload"), "", "longer than 65507 bytes, the largest UDP datagram")
	}
}

// MaxUDPPayload is the largest UDP payload over IPv4.
const MaxUDPPayload = 65507
