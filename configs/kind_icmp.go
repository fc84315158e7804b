package configs

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults and limits of a check of kind "icmp" ([check.NAME.icmp]).
const (
	// DefaultICMPCount is the number of echo requests of one probe.
	DefaultICMPCount = 3
	// DefaultICMPInterval is the time between the echo requests of one
	// probe.
	DefaultICMPInterval = 100 * time.Millisecond
	// DefaultICMPSize is the payload of an echo request in bytes: the
	// smallest the prober accepts (an 8-byte send time and a 16-byte tag
	// that matches replies to requests).
	DefaultICMPSize = MinICMPSize
	// DefaultICMPMaxLossPercent lets one lost echo of the default three
	// pass (33% loss) and fails on two.
	DefaultICMPMaxLossPercent = 34
	// DefaultICMPPrivileged chooses the socket kind at start.
	DefaultICMPPrivileged = ICMPAuto

	// MinICMPSize is the smallest payload: the send time and the tag.
	MinICMPSize = 24
	// MaxICMPSize is the largest payload of an IPv4 echo request.
	MaxICMPSize = 65507
	// MaxICMPCount bounds the echo requests of one probe.
	MaxICMPCount = 100
	// MinICMPInterval bounds how fast one probe sends.
	MinICMPInterval = time.Millisecond
)

// Socket kinds of a check of kind "icmp" (ICMPCheck.Privileged).
const (
	// ICMPAuto tries a raw socket, then an unprivileged ping socket.
	ICMPAuto = "auto"
	// ICMPRaw is a raw ICMP socket; it needs CAP_NET_RAW.
	ICMPRaw = "raw"
	// ICMPUnprivileged is a ping socket (SOCK_DGRAM, IPPROTO_ICMP); the
	// process's group must be in net.ipv4.ping_group_range.
	ICMPUnprivileged = "unprivileged"
)

// ICMPCheck is the settings of a check of kind "icmp" ([check.NAME.icmp]):
// each probe sends Count echo requests Interval apart and waits for the
// replies until the check's timeout; it fails when no reply came, when
// more than MaxLossPercent of the requests went unanswered, or when the
// average round trip exceeds MaxRTT.
//
// Every field takes part in ProbeIdentity except those tagged `json:"-"`.
type ICMPCheck struct {
	// Count is the number of echo requests per probe. Default 3.
	Count int `toml:"count"`
	// Interval is the time between the echo requests of one probe;
	// Count × Interval must be less than the check's timeout, so that the
	// last echo has time to come back.
	// Default 100ms.
	Interval Duration `toml:"interval"`
	// Size is the payload of each echo request in bytes, 24 to 65507.
	// Default 24.
	Size int `toml:"size"`
	// MaxLossPercent is the loss (0 to 99) above which a probe fails.
	// Default 34: one lost echo of three passes, two fail.
	MaxLossPercent int `toml:"max_loss_percent"`
	// MaxRTT, when set, fails a probe whose average round trip is longer.
	MaxRTT Duration `toml:"max_rtt"`
	// Privileged is the socket kind: "auto" (default: raw when the process
	// has CAP_NET_RAW, else a ping socket when net.ipv4.ping_group_range
	// allows its group), "raw" or "unprivileged". It changes how the
	// echoes are sent, not what they prove, so it is not part of the
	// probe's identity.
	Privileged string `toml:"privileged" json:"-"`
}

// icmpDefaults gives a check of kind "icmp" its settings table when the
// document has none, and fills the keys the table leaves out (m is the
// [check.NAME] table as decoded generically).
func icmpDefaults(k *Check, m map[string]any) {
	if k.Kind != "icmp" {
		return
	}
	if k.ICMP == nil {
		k.ICMP = &ICMPCheck{}
	}
	sub, _ := m["icmp"].(map[string]any)
	has := func(key string) bool { _, ok := sub[key]; return ok }
	c := k.ICMP
	if !has("count") {
		c.Count = DefaultICMPCount
	}
	if !has("interval") {
		c.Interval.Duration = DefaultICMPInterval
	}
	if !has("size") {
		c.Size = DefaultICMPSize
	}
	if !has("max_loss_percent") {
		c.MaxLossPercent = DefaultICMPMaxLossPercent
	}
	if !has("privileged") {
		c.Privileged = DefaultICMPPrivileged
	}
}

// validateICMP checks the settings of a check of kind "icmp" (the check at
// key path base).
func (d *decoder) validateICMP(base string, k *Check) {
	c := k.ICMP
	if c == nil {
		return // defaults gives every icmp check its table
	}
	base = joinKey(base, "icmp")
	if c.Count < 1 || c.Count > MaxICMPCount {
		d.p.add(joinKey(base, "count"), strconv.Itoa(c.Count), fmt.Sprintf("must be between 1 and %d", MaxICMPCount))
	}
	iv := c.Interval.Duration
	switch to := k.Timeout.Duration; {
	case iv < MinICMPInterval:
		d.p.add(joinKey(base, "interval"), fmtDur(iv), "must be at least "+fmtDur(MinICMPInterval))
	case c.Count >= 1 && c.Count <= MaxICMPCount && to > 0 && time.Duration(c.Count)*iv >= to:
		d.p.add(joinKey(base, "interval"), fmtDur(iv), fmt.Sprintf(
			"count × interval (%d × %s = %s) must be less than the check's timeout (%s): lower count or interval, or raise timeout",
			c.Count, fmtDur(iv), fmtDur(time.Duration(c.Count)*iv), fmtDur(to)))
	}
	if c.Size < MinICMPSize || c.Size > MaxICMPSize {
		d.p.add(joinKey(base, "size"), strconv.Itoa(c.Size), fmt.Sprintf("must be between %d and %d bytes", MinICMPSize, MaxICMPSize))
	}
	if c.MaxLossPercent < 0 || c.MaxLossPercent > 99 {
		d.p.add(joinKey(base, "max_loss_percent"), strconv.Itoa(c.MaxLossPercent), "must be between 0 and 99 (a probe with no reply always fails)")
	}
	if rtt := c.MaxRTT.Duration; rtt < 0 || (rtt > 0 && k.Timeout.Duration > 0 && rtt >= k.Timeout.Duration) {
		d.p.add(joinKey(base, "max_rtt"), fmtDur(rtt), "must be more than zero and less than the check's timeout ("+fmtDur(k.Timeout.Duration)+"), or unset")
	}
	if !oneOf(c.Privileged, []string{ICMPAuto, ICMPRaw, ICMPUnprivileged}) {
		d.p.add(joinKey(base, "privileged"), c.Privileged, `unknown socket kind (want "auto", "raw" or "unprivileged")`)
	}
}
