package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	probing "github.com/prometheus-community/pro-bing"
	"golang.org/x/net/icmp"

	"lbdns/check"
	"lbdns/configs"
)

// pingGroupRange is where Linux says which groups may open unprivileged
// ping sockets (it governs IPv4 and IPv6 alike).
const pingGroupRange = "/proc/sys/net/ipv4/ping_group_range"

// icmpChecker is the checker of kind "icmp" for one target: each Check
// runs one pro-bing Pinger (its own socket, its own echo ID and a random
// 16-byte tag in every payload) that sends count echo requests interval
// apart and counts the replies until the deadline.
//
// Replies are matched by pro-bing, which handles Linux's rewriting of the
// echo ID on unprivileged ping sockets: on a raw socket it filters by its
// ID (a BPF filter, then a check); on a ping socket (SOCK_DGRAM) the kernel
// replaces the ID with the socket's own and delivers only that socket's
// replies, so pro-bing ignores the ID there. Both then accept only replies
// carrying the tag of this Pinger and a sequence number still awaited.
type icmpChecker struct {
	addr *net.IPAddr
	// socket is configs.ICMPRaw or configs.ICMPUnprivileged.
	socket   string
	count    int
	interval time.Duration
	size     int
	maxLoss  int
	maxRTT   time.Duration
	// timeout is the budget when the context has no deadline.
	timeout time.Duration
}

// newICMPChecker is the Constructor of kind "icmp". It chooses the socket
// kind now (ICMPSocket), so a process that can open neither fails here.
func newICMPChecker(chk *configs.Check, target netip.AddrPort, _ Deps) (check.Checker, error) {
	s := chk.ICMP
	if s == nil {
		return nil, errors.New("no icmp settings")
	}
	a := target.Addr().Unmap()
	if !a.IsValid() {
		return nil, fmt.Errorf("invalid target address %s", target)
	}
	if s.Count < 1 {
		return nil, fmt.Errorf("count %d: must be at least 1", s.Count)
	}
	if s.Size < configs.MinICMPSize {
		return nil, fmt.Errorf("size %d: must be at least %d", s.Size, configs.MinICMPSize)
	}
	socket, err := ICMPSocket(s.Privileged, a.Is6())
	if err != nil {
		return nil, err
	}
	c := &icmpChecker{
		addr:     &net.IPAddr{IP: a.AsSlice(), Zone: a.Zone()},
		socket:   socket,
		count:    s.Count,
		interval: s.Interval.Duration,
		size:     s.Size,
		maxLoss:  s.MaxLossPercent,
		maxRTT:   s.MaxRTT.Duration,
		timeout:  chk.Timeout.Duration,
	}
	if c.interval <= 0 {
		c.interval = configs.DefaultICMPInterval
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	return c, nil
}

// ICMPSocket returns the socket kind icmp checks with the given privileged
// setting ("auto", "" meaning auto, "raw" or "unprivileged") use for one
// address family, by opening and closing one: "raw" when a raw ICMP socket
// opens (CAP_NET_RAW), else "unprivileged" when a ping socket opens (the
// process's group in net.ipv4.ping_group_range). The error names the way
// to enable each kind it tried.
func ICMPSocket(privileged string, ipv6 bool) (string, error) {
	return chooseICMPSocket(privileged, ipv6, tryICMPListen)
}

// chooseICMPSocket is ICMPSocket with the socket opening injected: open
// returns why a socket of the kind cannot be opened, or nil.
func chooseICMPSocket(privileged string, ipv6 bool, open func(socket string, ipv6 bool) error) (string, error) {
	var tries []string
	switch privileged {
	case "", configs.ICMPAuto, configs.ICMPRaw, configs.ICMPUnprivileged:
	default:
		return "", fmt.Errorf("unknown privileged setting %q (want auto, raw or unprivileged)", privileged)
	}
	fam := "IPv4"
	if ipv6 {
		fam = "IPv6"
	}
	// auto tries the unprivileged ping socket first: the kernel hands
	// every ICMP packet to every raw ICMP socket, so a raw socket per
	// probe costs each probe the traffic of all the others (measured:
	// 1,000 members at 1 s, 1.9 ms of CPU per check on raw sockets, 0.36
	// ms on ping sockets), while ping sockets see only their own replies.
	if privileged != configs.ICMPRaw {
		err := open(configs.ICMPUnprivileged, ipv6)
		if err == nil {
			return configs.ICMPUnprivileged, nil
		}
		tries = append(tries, fmt.Sprintf("unprivileged ping socket: %v (needs the process's group in net.ipv4.ping_group_range%s)", err, currentPingGroups()))
	}
	if privileged != configs.ICMPUnprivileged {
		err := open(configs.ICMPRaw, ipv6)
		if err == nil {
			return configs.ICMPRaw, nil
		}
		tries = append(tries, fmt.Sprintf("raw socket: %v (needs CAP_NET_RAW)", err))
	}
	return "", fmt.Errorf("cannot open an %s ICMP socket: %s", fam, strings.Join(tries, "; "))
}

// tryICMPListen opens and closes a socket of the kind.
func tryICMPListen(socket string, ipv6 bool) error {
	c, err := icmp.ListenPacket(icmpNetwork(socket, ipv6), "")
	if err != nil {
		var se *os.SyscallError
		if errors.As(err, &se) {
			return se.Err
		}
		return err
	}
	return c.Close()
}

// icmpNetwork is the network of icmp.ListenPacket for a socket kind, as
// pro-bing opens it.
func icmpNetwork(socket string, ipv6 bool) string {
	switch {
	case socket == configs.ICMPRaw && ipv6:
		return "ip6:ipv6-icmp"
	case socket == configs.ICMPRaw:
		return "ip4:icmp"
	case ipv6:
		return "udp6"
	}
	return "udp4"
}

// currentPingGroups returns `, now "LOW HIGH"` with the kernel's
// ping_group_range, or "" when it cannot be read.
func currentPingGroups() string {
	b, err := os.ReadFile(pingGroupRange)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(", now %q", strings.Join(strings.Fields(string(b)), " "))
}

// ProbeAddr returns the address pinged, without a port (check.Addressed).
func (c *icmpChecker) ProbeAddr() netip.AddrPort {
	if c.addr == nil {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(c.addr.IP)
	return netip.AddrPortFrom(a.Unmap().WithZone(c.addr.Zone), 0)
}

// Check sends the echoes and judges the replies: it fails when no reply
// came, when the loss is above max_loss_percent, or when the average
// round trip is above max_rtt.
func (c *icmpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()
	budget := time.Until(deadline)
	if budget <= 0 || ctx.Err() != nil {
		return Result{Detail: describeErr(ctx, context.DeadlineExceeded, budget)}
	}

	p := probing.New("")
	p.SetIPAddr(c.addr)
	p.SetPrivileged(c.socket == configs.ICMPRaw)
	p.SetLogger(probing.NoopLogger{})
	p.Count = c.count
	p.Interval = c.interval
	p.Size = c.size
	p.Timeout = budget
	p.RecordRtts = false
	p.RecordTTLs = false
	// OnSendError runs on the Pinger's send loop, which has ended when
	// RunWithContext returns.
	var sendErr error
	p.OnSendError = func(_ *probing.Packet, err error) { sendErr = err }
	err := p.RunWithContext(ctx)
	st := p.Statistics()
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && ctx.Err() != nil {
		err = nil // the deadline ends a probe that lost echoes
	}
	if err == nil {
		err = sendErr
	}
	return c.judge(ctx, st.PacketsSent, st.PacketsRecv, st.AvgRtt, time.Since(start), budget, err)
}

// The icmp kind's facts: the echo loss of a probe that sent any, in
// percent, and the ICMP socket its checker uses ("raw" or
// "unprivileged").
const (
	LossPercentFact = "loss_percent"
	SocketFact      = "socket"
)

// icmpFactMetrics returns the metrics of the icmp kind's facts.
func icmpFactMetrics() []check.FactMetric {
	return []check.FactMetric{{Fact: LossPercentFact, Metric: "gslb_icmp_loss_ratio",
		Help: "Echo loss of the ICMP monitor's last probe, 0 to 1.", Scale: 0.01}}
}

// judge turns the counts of one probe into its Result; err is the first
// socket error (nil when none), elapsed the probe's duration.
func (c *icmpChecker) judge(ctx context.Context, sent, recv int, avg, elapsed, budget time.Duration, err error) Result {
	r := Result{RTT: elapsed}
	loss := 0.0
	if sent > 0 {
		loss = float64(sent-recv) / float64(sent) * 100
		r.Facts = append(r.Facts, check.Fact{Name: LossPercentFact, Value: loss})
	}
	if c.socket != "" {
		r.Facts = append(r.Facts, check.Fact{Name: SocketFact, Text: c.socket})
	}
	counts := fmt.Sprintf("%d/%d echoes", recv, sent)
	switch {
	case sent == 0 && err != nil:
		r.Detail = icmpErrText(err)
		r.Cause = localCause(err, c.ProbeAddr())
	case sent == 0:
		r.Detail = describeErr(ctx, context.DeadlineExceeded, budget)
	case recv == 0 && err != nil:
		// Echoes went out and none came back: the target's, whatever
		// failed to send.
		r.Detail = fmt.Sprintf("no reply to %d echoes (%s)", sent, icmpErrText(err))
	case recv == 0:
		r.Detail = fmt.Sprintf("no reply to %d echoes (%s)", sent, describeErr(ctx, context.DeadlineExceeded, budget))
	case loss > float64(c.maxLoss):
		r.RTT = avg
		r.Detail = fmt.Sprintf("loss %.0f%% above max_loss_percent %d (%s)", loss, c.maxLoss, counts)
	case c.maxRTT > 0 && avg > c.maxRTT:
		r.RTT = avg
		r.Detail = fmt.Sprintf("avg rtt %s above max_rtt %s (%s)", fmtRTT(avg), c.maxRTT, counts)
	default:
		r.OK, r.RTT = true, avg
		r.Detail = fmt.Sprintf("%s, avg %s (%s)", counts, fmtRTT(avg), socketText(c.socket))
	}
	return r
}

// socketText names a socket kind in a Detail.
func socketText(socket string) string {
	if socket == configs.ICMPRaw {
		return "raw socket"
	}
	return "unprivileged ping socket"
}

// fmtRTT rounds a round trip for display: to 10µs below 10ms, to 100µs
// above.
func fmtRTT(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// icmpErrText is the short text of a socket error: the system call and
// its error ("sendto: network is unreachable") when there is one.
func icmpErrText(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Syscall + ": " + se.Err.Error()
	}
	return err.Error()
}
