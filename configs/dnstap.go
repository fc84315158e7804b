package configs

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"
)

// Dnstap is the dnstap intake ([dnstap]): lbdnsd listens for Frame
// Streams of dnstap from the back-end resolvers (their CLIENT_QUERY and
// CLIENT_RESPONSE messages) on a Unix socket, on TCP, or both. Without
// the table nothing listens. Every key takes effect at the next restart
// (a reload keeps the running ones).
type Dnstap struct {
	// Unix is the path of the Unix socket to listen on (mode 0660), ""
	// for none. Default "".
	Unix string `toml:"unix"`
	// TCP is the "ADDRESS:PORT" to listen on, "" for none. Default "".
	TCP string `toml:"tcp"`
	// MaxConnections caps the connections open at once over both
	// listeners; one more is closed as soon as it is accepted. Default
	// 64.
	MaxConnections int `toml:"max_connections"`
	// MaxConnectionsPerSource caps the TCP connections open at once from
	// one address, so that one source cannot take every slot. Default 4.
	MaxConnectionsPerSource int `toml:"max_connections_per_source"`
	// IdleTimeout closes a connection that sends no frame for that long
	// after its handshake; 0s: never. Default 10m.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxFrame caps one Frame Streams frame (one dnstap message), in
	// bytes; a connection sending a larger one is closed. Default
	// 131072.
	MaxFrame int `toml:"max_frame"`
	// HandshakeTimeout bounds the time from connect to the end of the
	// Frame Streams handshake, and each write to a peer. Default 5s.
	HandshakeTimeout Duration `toml:"handshake_timeout"`
}

// Defaults and limits of [dnstap].
const (
	DefaultDnstapMaxConnections   = 64
	MaxDnstapConnections          = 10000
	DefaultDnstapMaxFrame         = 128 << 10
	MinDnstapMaxFrame             = 4 << 10
	MaxDnstapMaxFrame             = 16 << 20
	DefaultDnstapHandshakeTimeout = 5 * time.Second
	DefaultDnstapPerSource        = 4
	DefaultDnstapIdleTimeout      = 10 * time.Minute
	MaxDnstapIdleTimeout          = 24 * time.Hour
)

// decodeDnstap decodes the optional [dnstap] table into cfg.Dnstap (nil
// when the table is absent) and applies its defaults.
func (d *decoder) decodeDnstap(raw map[string]any) {
	if !hasKey(raw, "dnstap") {
		return
	}
	var t Dnstap
	d.dnstapRaw, d.dnstapOK = d.table("dnstap", raw, &t)
	if !hasKey(d.dnstapRaw, "max_connections") {
		t.MaxConnections = DefaultDnstapMaxConnections
	}
	if !hasKey(d.dnstapRaw, "max_frame") {
		t.MaxFrame = DefaultDnstapMaxFrame
	}
	if !hasKey(d.dnstapRaw, "max_connections_per_source") {
		t.MaxConnectionsPerSource = DefaultDnstapPerSource
	}
	if !hasKey(d.dnstapRaw, "idle_timeout") {
		t.IdleTimeout.Duration = DefaultDnstapIdleTimeout
	}
	if !hasKey(d.dnstapRaw, "handshake_timeout") {
		t.HandshakeTimeout.Duration = DefaultDnstapHandshakeTimeout
	}
	d.cfg.Dnstap = &t
}

// validateDnstap checks [dnstap].
func (d *decoder) validateDnstap() {
	t := d.cfg.Dnstap
	if t == nil || !d.dnstapOK {
		return
	}
	const base = "dnstap"
	if t.Unix == "" && t.TCP == "" {
		d.p.add(base, "", `missing: set unix (a socket path such as "/run/lbdns/dnstap.sock"), tcp ("ADDRESS:PORT"), or both`)
	}
	switch u := t.Unix; {
	case u == "":
	case !filepath.IsAbs(u):
		d.p.add(joinKey(base, "unix"), u, "must be an absolute path")
	case len(u) > MaxSocketPath:
		d.p.add(joinKey(base, "unix"), u, fmt.Sprintf("too long for a Unix socket (at most %d bytes)", MaxSocketPath))
	case filepath.Clean(u) == filepath.Clean(d.cfg.Daemon.ControlSocket):
		d.p.add(joinKey(base, "unix"), u, "is daemon.control_socket: the dnstap socket needs a path of its own")
	}
	if t.TCP != "" {
		if _, err := netip.ParseAddrPort(t.TCP); err != nil {
			d.p.add(joinKey(base, "tcp"), t.TCP, `want ADDRESS:PORT such as "127.0.0.1:6000" or "[::]:6000"`)
		}
	}
	if n := t.MaxConnections; n < 1 || n > MaxDnstapConnections {
		d.p.add(joinKey(base, "max_connections"), strconv.Itoa(n), fmt.Sprintf("must be between 1 and %d", MaxDnstapConnections))
	}
	if n := t.MaxConnectionsPerSource; n < 1 || n > MaxDnstapConnections {
		d.p.add(joinKey(base, "max_connections_per_source"), strconv.Itoa(n), fmt.Sprintf("must be between 1 and %d", MaxDnstapConnections))
	}
	if i := t.IdleTimeout.Duration; i != 0 && (i < time.Second || i > MaxDnstapIdleTimeout) {
		d.p.add(joinKey(base, "idle_timeout"), fmtDur(i), "must be 0s (never) or between 1s and "+fmtDur(MaxDnstapIdleTimeout))
	}
	if n := t.MaxFrame; n < MinDnstapMaxFrame || n > MaxDnstapMaxFrame {
		d.p.add(joinKey(base, "max_frame"), strconv.Itoa(n), fmt.Sprintf("must be between %d and %d bytes", MinDnstapMaxFrame, MaxDnstapMaxFrame))
	}
	if h := t.HandshakeTimeout.Duration; h < 100*time.Millisecond || h > time.Minute {
		d.p.add(joinKey(base, "handshake_timeout"), fmtDur(h), "must be between 100ms and "+fmtDur(time.Minute))
	}
}

// Equal reports whether t and o say the same (both nil included).
func (t *Dnstap) Equal(o *Dnstap) bool {
	if t == nil || o == nil {
		return t == o
	}
	return *t == *o
}
