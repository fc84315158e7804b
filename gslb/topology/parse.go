package topology

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// maxLine is the longest line of a prefix list (as bufio.Scanner's
// buffer allowed before).
const maxLine = 1024 * 1024

// parseInto parses the prefix list data (see AddList; name, for
// messages) into dst, which has room for an entry per line (the count of
// newlines and one), entries with the label set id in the order of the
// lines, and returns how many it wrote; the order of addition
// (kidStart) is set when they are added to a Builder. It keeps nothing
// of data and writes only dst, so lists parse in parallel. An error
// names the list (name) and the line.
func parseInto(dst []entry, data []byte, name string, id uint32) (int, error) {
	k := 0
	n := 0
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(line) > maxLine {
			return 0, fmt.Errorf("%s: after line %d: %w", name, n, bufio.ErrTooLong)
		}
		n++
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = trimASCII(line)
		if len(line) == 0 {
			continue
		}
		p, ok := parseV4(line)
		if !ok {
			// Everything else (IPv6, odd spacing, errors) as ParsePrefix
			// has it.
			s := strings.TrimSpace(string(line))
			if s == "" {
				continue
			}
			var err error
			if p, err = ParsePrefix(s); err != nil {
				return 0, fmt.Errorf("%s:%d: %w", name, n, err)
			}
		} else if p.Masked() != p {
			if _, err := canonical(p); err != nil {
				return 0, fmt.Errorf("%s:%d: %w", name, n, err)
			}
		}
		hi, lo := words(p.Addr())
		dst[k] = entry{hi: hi, lo: lo, bits: uint8(p.Bits()), v6: p.Addr().Is6(), labels: id}
		k++
	}
	return k, nil
}

// trimASCII trims the ASCII white space strings.TrimSpace trims.
func trimASCII(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseV4 parses the common line of a prefix list without allocating: an
// IPv4 address in dotted decimal (no leading zeros), with or without a
// /LENGTH (no leading zeros). It reports false for anything else, which
// ParsePrefix then parses (or refuses) as before.
func parseV4(b []byte) (netip.Prefix, bool) {
	var a [4]byte
	i := 0
	for k := range 4 {
		if k > 0 {
			if i >= len(b) || b[i] != '.' {
				return netip.Prefix{}, false
			}
			i++
		}
		v, j, ok := decimal(b, i, 255)
		if !ok {
			return netip.Prefix{}, false
		}
		a[k], i = byte(v), j
	}
	bits := 32
	if i < len(b) {
		if b[i] != '/' {
			return netip.Prefix{}, false
		}
		v, j, ok := decimal(b, i+1, 32)
		if !ok || j != len(b) {
			return netip.Prefix{}, false
		}
		bits = v
	}
	return netip.PrefixFrom(netip.AddrFrom4(a), bits), true
}

// decimal parses the decimal number at b[i:] (one to three digits, no
// leading zero, at most max) and returns it and the index after it.
func decimal(b []byte, i, max int) (int, int, bool) {
	v, j := 0, i
	for j < len(b) && j-i < 3 && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + int(b[j]-'0')
		j++
	}
	if j == i || (j-i > 1 && b[i] == '0') || v > max || (j < len(b) && b[j] >= '0' && b[j] <= '9') {
		return 0, 0, false
	}
	return v, j, true
}
