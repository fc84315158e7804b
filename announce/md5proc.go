package announce

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// procTCP reads the kernel's TCP state from /proc of the namespace
// this process runs in (its root is "/proc" but for tests).
type procTCP struct{ root string }

// Counters implements tcpReader.
func (p procTCP) Counters() (tcpCounters, error) {
	f, err := os.Open(p.root + "/net/netstat")
	if err != nil {
		return tcpCounters{}, fmt.Errorf("bgp: read the TCP MD5 counters: %w", err)
	}
	defer f.Close()
	return parseNetstat(f)
}

// SynSent implements tcpReader.
func (p procTCP) SynSent() ([]synSent, error) {
	var out []synSent
	var errs []error
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(p.root + "/net/" + name)
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: read the connections: %w", err))
			continue
		}
		got, err := parseProcTCP(f)
		f.Close()
		out = append(out, got...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// parseNetstat reads the MD5 counters of TcpExt in /proc/net/netstat's
// format (a line of names, then a line of values).
func parseNetstat(r io.Reader) (tcpCounters, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		var c tcpCounters
		found := 0
		for i := 1; i < len(f) && i < len(names); i++ {
			var dst *uint64
			switch names[i] {
			case "TCPMD5NotFound":
				dst = &c.NotFound
			case "TCPMD5Unexpected":
				dst = &c.Unexpected
			case "TCPMD5Failure":
				dst = &c.Failure
			default:
				continue
			}
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return tcpCounters{}, fmt.Errorf("bgp: netstat %s: %w", names[i], err)
			}
			*dst = v
			found++
		}
		if found == 0 {
			return tcpCounters{}, errors.New("bgp: netstat: no TCPMD5 counters in TcpExt (a kernel without TCP MD5)")
		}
		return c, nil
	}
	if err := sc.Err(); err != nil {
		return tcpCounters{}, fmt.Errorf("bgp: netstat: %w", err)
	}
	return tcpCounters{}, errors.New("bgp: netstat: no TcpExt values")
}

// tcpSynSent is SYN_SENT in /proc/net/tcp's st column.
const tcpSynSent = "02"

// parseProcTCP returns the connections in SYN_SENT of /proc/net/tcp or
// tcp6.
func parseProcTCP(r io.Reader) ([]synSent, error) {
	sc := bufio.NewScanner(r)
	var out []synSent
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		// sl local rem st tx:rx tr:when retrnsmt ...
		f := strings.Fields(sc.Text())
		if len(f) < 7 || f[3] != tcpSynSent {
			continue
		}
		rem, err := parseProcAddr(f[2])
		if err != nil {
			return out, err
		}
		n, err := strconv.ParseUint(f[6], 16, 32)
		if err != nil {
			return out, fmt.Errorf("bgp: /proc/net/tcp retransmits %q: %w", f[6], err)
		}
		out = append(out, synSent{Remote: rem, Retransmits: int(n)})
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("bgp: /proc/net/tcp: %w", err)
	}
	return out, nil
}

// parseProcAddr parses an address of /proc/net/tcp: the address as
// 32-bit words in the host's byte order, in hex, then ":" and the port.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bgp: /proc/net/tcp address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bgp: /proc/net/tcp address %q: %w", s, err)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bgp: /proc/net/tcp port %q: %w", s, err)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
