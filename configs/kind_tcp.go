package configs

import (
	"fmt"
	"regexp"
	"strconv"
)

// Defaults and limits of kind "tcp" (see CONFIGURATION.md).
const (
	// DefaultTCPMaxRead is how many bytes a tcp check reads at most
	// looking for expect.
	DefaultTCPMaxRead = 4096
	// MaxTCPMaxRead is the largest max_read.
	MaxTCPMaxRead = 1 << 20
)

// TCPCheck is the settings of a check of kind "tcp" ([check.NAME.tcp]): a
// connection to the target, optionally over TLS, optionally a request sent
// and the first bytes of the reply matched.
//
// Every field takes part in ProbeIdentity.
type TCPCheck struct {
	// Port to connect to. Default 0: the target's port.
	Port int `toml:"port"`
	// Send is written once the connection (and TLS) is up. TOML escapes
	// ("\r\n") give control characters. Default: nothing.
	Send string `toml:"send"`
	// Expect, when set, is a regexp that must match the first bytes read
	// (at most MaxRead). Default: the connection alone is the check.
	Expect string `toml:"expect"`
	// MaxRead bounds the bytes read looking for Expect. Default 4096.
	MaxRead int `toml:"max_read"`
	// TLS makes the check a TLS handshake (verified) after connecting.
	// Default false.
	TLS bool `toml:"tls"`
	// ServerName is the TLS SNI and the name verified. Default: the
	// target's address.
	ServerName string `toml:"server_name"`
	// CAFile is a PEM file of the CAs that verify the server. Default: the
	// system roots.
	CAFile string `toml:"ca_file"`
	// InsecureSkipVerify accepts any server certificate. Default false.
	InsecureSkipVerify bool `toml:"insecure_skip_verify"`
}

// tcpDefaults gives a check of kind "tcp" its settings (a bare connect
// without a sub-table) and fills the keys it leaves out. m is the
// [check.NAME] table as decoded generically.
func tcpDefaults(k *Check, m map[string]any) {
	if k.Kind != "tcp" {
		return
	}
	if k.TCP == nil {
		k.TCP = &TCPCheck{}
	}
	if !subHas(m, "tcp", "max_read") {
		k.TCP.MaxRead = DefaultTCPMaxRead
	}
}

// validateTCP checks the settings of a check of kind "tcp" (the [check.NAME]
// table at key path base, raw as decoded generically).
func (d *decoder) validateTCP(base string, k *Check, raw map[string]any) {
	t := k.TCP
	if t == nil {
		return
	}
	base = joinKey(base, "tcp")
	d.validatePort(base, t.Port)
	if subHas(raw, "tcp", "expect") {
		d.validateExpect(base, t.Expect)
	}
	if subHas(raw, "tcp", "send") && t.Send == "" {
		d.p.add(joinKey(base, "send"), "", "must not be empty (leave the key out instead)")
	}
	if t.MaxRead < 1 || t.MaxRead > MaxTCPMaxRead {
		d.p.add(joinKey(base, "max_read"), strconv.Itoa(t.MaxRead), fmt.Sprintf("must be between 1 and %d", MaxTCPMaxRead))
	}
	sub, _ := raw["tcp"].(map[string]any)
	if !t.TLS {
		for _, key := range []string{"server_name", "ca_file", "insecure_skip_verify"} {
			if v, present := sub[key]; present {
				d.p.add(joinKey(base, key), scalarText(v), "a TLS setting: only with tls = true")
			}
		}
		return
	}
	if t.ServerName != "" && !validDNSName(t.ServerName) {
		d.p.add(joinKey(base, "server_name"), t.ServerName, "not a valid host name")
	}
	if v, present := sub["ca_file"]; present && v == "" {
		d.p.add(joinKey(base, "ca_file"), "", "must not be empty (leave the key out instead)")
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		d.p.add(joinKey(base, "ca_file"), t.CAFile, "has no effect with insecure_skip_verify = true")
	}
}

// validateExpect checks the expect regexp of the kind table at base.
func (d *decoder) validateExpect(base, re string) {
	if re == "" {
		d.p.add(joinKey(base, "expect"), "", "must not be empty (leave the key out instead)")
		return
	}
	if _, err := regexp.Compile(re); err != nil {
		d.p.add(joinKey(base, "expect"), re, fmt.Sprintf("does not compile: %v", err))
	}
}

// validatePort checks the port key of the kind table at base (0: the
// target's port).
func (d *decoder) validatePort(base string, port int) {
	if port < 0 || port > 65535 {
		d.p.add(joinKey(base, "port"), strconv.Itoa(port), "must be between 1 and 65535 (or 0, the default: the target's port)")
	}
}
