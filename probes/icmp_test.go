package probes

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// icmpCheck returns an icmp check profile with the given settings
// (Load's defaults for the others).
func icmpCheck(count int, interval, timeout time.Duration, maxLoss int, privileged string) *configs.Check {
	return &configs.Check{
		Name: "ping", Kind: "icmp", Timeout: configs.Duration{Duration: timeout},
		ICMP: &configs.ICMPCheck{
			Count: count, Interval: configs.Duration{Duration: interval}, Size: configs.DefaultICMPSize,
			MaxLossPercent: maxLoss, Privileged: privileged,
		},
	}
}

// buildICMP builds the icmp checker of chk for addr, skipping the test
// when this process can open no ICMP socket.
func buildICMP(t *testing.T, chk *configs.Check, addr netip.Addr) check.Checker {
	t.Helper()
	if _, err := ICMPSocket(chk.ICMP.Privileged, addr.Is6()); err != nil {
		t.Skipf("no ICMP socket here: %v", err)
	}
	c, err := NewBuilder(Deps{}).Build(chk, netip.AddrPortFrom(addr, 0))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return c
}

// wantEchoes fails t unless r is a success with every echo answered.
func wantEchoes(t *testing.T, r Result, n int, socket string) {
	t.Helper()
	if sent, recv := echoCounts(r); !r.OK || sent != n || recv != n || lossOf(r) != 0 {
		t.Fatalf("result %+v, want OK with %d/%d echoes", r, n, n)
	}
	prefix, suffix := fmt.Sprintf("%d/%d echoes, avg ", n, n), "("+socketText(socket)+")"
	if !strings.HasPrefix(r.Detail, prefix) || !strings.HasSuffix(r.Detail, suffix) {
		t.Errorf("detail %q, want %q... %q", r.Detail, prefix, suffix)
	}
	if r.RTT <= 0 || r.RTT > time.Second {
		t.Errorf("rtt %v, want the average round trip", r.RTT)
	}
}

func TestICMPLoopback(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "::1"} {
		t.Run(a, func(t *testing.T) {
			t.Parallel()
			c := buildICMP(t, icmpCheck(3, 10*time.Millisecond, time.Second, 34, configs.ICMPAuto), netip.MustParseAddr(a))
			mode := icmpMode(c)
			if mode != configs.ICMPRaw && mode != configs.ICMPUnprivileged {
				t.Fatalf("icmpMode = %q, want raw or unprivileged", mode)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			wantEchoes(t, c.Check(ctx), 3, mode)
		})
	}
}

// TestICMPLoopbackConcurrent: checkers of one target running at once
// each count their own replies only (every raw socket sees every reply;
// the ID filter and the payload tag keep them apart), and one checker is
// safe for concurrent use.
func TestICMPLoopbackConcurrent(t *testing.T) {
	t.Parallel()
	chk := icmpCheck(3, 10*time.Millisecond, time.Second, 0, configs.ICMPAuto)
	shared := buildICMP(t, chk, netip.MustParseAddr("127.0.0.1"))
	const n = 8
	results := make([]Result, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		c := shared
		if i >= n {
			c = buildICMP(t, chk, netip.MustParseAddr("127.0.0.1"))
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			results[i] = c.Check(ctx)
		})
	}
	wg.Wait()
	for i, r := range results {
		if sent, recv := echoCounts(r); !r.OK || sent != 3 || recv != 3 {
			t.Errorf("checker %d: %+v, want 3/3 echoes", i, r)
		}
	}
}

func TestICMPNoSettings(t *testing.T) {
	t.Parallel()
	_, err := NewBuilder(Deps{}).Build(&configs.Check{Name: "ping", Kind: "icmp"}, netip.MustParseAddrPort("127.0.0.1:0"))
	if err == nil || !strings.Contains(err.Error(), `check "ping": no icmp settings`) {
		t.Fatalf("err = %v, want no icmp settings", err)
	}
}

func TestICMPModeOfOtherKind(t *testing.T) {
	t.Parallel()
	if m := icmpMode(check.Func(func(context.Context) Result { return Result{} })); m != "" {
		t.Errorf("ICMPMode of a non-icmp checker = %q, want empty", m)
	}
}

func TestChooseICMPSocket(t *testing.T) {
	t.Parallel()
	works := func(string, bool) error { return nil }
	rawOnly := func(s string, _ bool) error {
		if s == configs.ICMPRaw {
			return nil
		}
		return syscall.EACCES
	}
	pingOnly := func(s string, _ bool) error {
		if s == configs.ICMPRaw {
			return syscall.EPERM
		}
		return nil
	}
	none := func(s string, _ bool) error {
		if s == configs.ICMPRaw {
			return syscall.EPERM
		}
		return syscall.EACCES
	}
	for _, tc := range []struct {
		name, privileged string
		ipv6             bool
		open             func(string, bool) error
		want             string
		// errs are texts the error must hold (want is "" then).
		errs []string
	}{
		{name: "auto prefers the ping socket", privileged: "auto", open: works, want: "unprivileged"},
		{name: "auto falls back to raw", privileged: "auto", open: rawOnly, want: "raw"},
		{name: "empty is auto", privileged: "", open: pingOnly, want: "unprivileged"},
		{name: "auto with the ping socket only", privileged: "auto", open: pingOnly, want: "unprivileged"},
		{name: "raw forced", privileged: "raw", open: rawOnly, want: "raw"},
		{name: "unprivileged forced", privileged: "unprivileged", open: works, want: "unprivileged"},
		{name: "auto neither", privileged: "auto", open: none, errs: []string{
			"cannot open an IPv4 ICMP socket: unprivileged ping socket: permission denied (needs the process's group in net.ipv4.ping_group_range",
			"); raw socket: operation not permitted (needs CAP_NET_RAW)"}},
		{name: "auto neither v6", privileged: "auto", ipv6: true, open: none, errs: []string{"cannot open an IPv6 ICMP socket", "CAP_NET_RAW", "ping_group_range"}},
		{name: "raw refused", privileged: "raw", open: pingOnly, errs: []string{"raw socket: operation not permitted (needs CAP_NET_RAW)"}},
		{name: "unprivileged refused", privileged: "unprivileged", open: rawOnly, errs: []string{"unprivileged ping socket: permission denied"}},
		{name: "unknown", privileged: "maybe", open: works, errs: []string{`unknown privileged setting "maybe"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chooseICMPSocket(tc.privileged, tc.ipv6, tc.open)
			if len(tc.errs) == 0 {
				if err != nil || got != tc.want {
					t.Fatalf("= %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("= %q, want an error", got)
			}
			for _, e := range tc.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not say %q", err, e)
				}
			}
			if tc.privileged == "raw" && strings.Contains(err.Error(), "ping_group_range") {
				t.Errorf("forced raw, but the error %q names the ping socket", err)
			}
			if tc.privileged == "unprivileged" && strings.Contains(err.Error(), "CAP_NET_RAW") {
				t.Errorf("forced unprivileged, but the error %q names the raw socket", err)
			}
		})
	}
}

func TestICMPJudge(t *testing.T) {
	t.Parallel()
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	sendErr := &net.OpError{Op: "write", Net: "ip4:icmp", Err: os.NewSyscallError("sendto", syscall.ENETUNREACH)}
	for _, tc := range []struct {
		name      string
		c         icmpChecker
		sent      int
		recv      int
		avg       time.Duration
		err       error
		ok        bool
		detail    string
		wantLoss  float64
		wantRTTIs time.Duration
	}{
		{name: "all answered", c: icmpChecker{socket: "raw", maxLoss: 34}, sent: 3, recv: 3, avg: 400 * time.Microsecond,
			ok: true, detail: "3/3 echoes, avg 400µs (raw socket)", wantRTTIs: 400 * time.Microsecond},
		{name: "unprivileged", c: icmpChecker{socket: "unprivileged", maxLoss: 34}, sent: 3, recv: 3, avg: 12345 * time.Microsecond,
			ok: true, detail: "3/3 echoes, avg 12.3ms (unprivileged ping socket)", wantRTTIs: 12345 * time.Microsecond},
		{name: "one lost of three passes", c: icmpChecker{socket: "raw", maxLoss: 34}, sent: 3, recv: 2, avg: time.Millisecond,
			ok: true, detail: "2/3 echoes, avg 1ms (raw socket)", wantLoss: 100.0 / 3},
		{name: "two lost of three fail", c: icmpChecker{socket: "raw", maxLoss: 34}, sent: 3, recv: 1, avg: time.Millisecond,
			detail: "loss 67% above max_loss_percent 34 (1/3 echoes)", wantLoss: 200.0 / 3},
		{name: "strict", c: icmpChecker{socket: "raw", maxLoss: 0}, sent: 20, recv: 19, avg: time.Millisecond,
			detail: "loss 5% above max_loss_percent 0 (19/20 echoes)", wantLoss: 5},
		{name: "none answered", c: icmpChecker{socket: "raw", maxLoss: 34}, sent: 3,
			detail: "no reply to 3 echoes (timeout after 1s)", wantLoss: 100},
		{name: "slow", c: icmpChecker{socket: "raw", maxLoss: 34, maxRTT: 10 * time.Millisecond}, sent: 3, recv: 3, avg: 25 * time.Millisecond,
			detail: "avg rtt 25ms above max_rtt 10ms (3/3 echoes)"},
		{name: "cannot send", c: icmpChecker{socket: "raw"}, err: sendErr, detail: "sendto: network is unreachable", wantLoss: 0},
		{name: "sent some then failed", c: icmpChecker{socket: "raw"}, sent: 1, err: sendErr,
			detail: "no reply to 1 echoes (sendto: network is unreachable)", wantLoss: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.judge(expired, tc.sent, tc.recv, tc.avg, 1500*time.Millisecond, time.Second, tc.err)
			if r.OK != tc.ok || r.Detail != tc.detail {
				t.Errorf("= %+v, want ok %v, detail %q", r, tc.ok, tc.detail)
			}
			if d := lossOf(r) - tc.wantLoss; d > 1e-9 || d < -1e-9 {
				t.Errorf("loss %v, want %v", lossOf(r), tc.wantLoss)
			}
			if _, has := check.Lookup(r.Facts, LossPercentFact); has != (tc.sent > 0) {
				t.Errorf("facts %+v: a loss fact %v, want %v (echoes sent: %d)", r.Facts, has, !has, tc.sent)
			}
			if f, _ := check.Lookup(r.Facts, SocketFact); f.Text != tc.c.socket {
				t.Errorf("socket fact %q, want %q", f.Text, tc.c.socket)
			}
			if tc.wantRTTIs != 0 && r.RTT != tc.wantRTTIs {
				t.Errorf("rtt %v, want %v", r.RTT, tc.wantRTTIs)
			}
		})
	}
}

// TestBuilderBuildsEveryKind: every check kind configs knows has a
// constructor in NewBuilder's table.
func TestBuilderBuildsEveryKind(t *testing.T) {
	t.Parallel()
	built := NewBuilder(Deps{}).kindNames()
	for _, k := range configs.CheckKinds() {
		if !slices.Contains(built, k) {
			t.Errorf("kind %q has no constructor in NewBuilder", k)
		}
	}
}

// lossOf returns r's echo loss fact in percent, 0 when it has none.
func lossOf(r Result) float64 {
	f, _ := check.Lookup(r.Facts, LossPercentFact)
	return f.Value
}

// echoCounts returns the echoes answered and sent that r's detail
// reports ("2/3 echoes"), -1 and -1 when it reports none.
func echoCounts(r Result) (sent, recv int) {
	if m := regexp.MustCompile(`(\d+)/(\d+) echoes`).FindStringSubmatch(r.Detail); m != nil {
		recv, _ = strconv.Atoi(m[1])
		sent, _ = strconv.Atoi(m[2])
		return sent, recv
	}
	if m := regexp.MustCompile(`no reply to (\d+) echoes`).FindStringSubmatch(r.Detail); m != nil {
		sent, _ = strconv.Atoi(m[1])
		return sent, 0
	}
	return -1, -1
}

// icmpMode returns the socket kind an icmp checker sends on,
// configs.ICMPRaw ("raw") or configs.ICMPUnprivileged ("unprivileged"),
// or "" when c is not an icmp checker.
func icmpMode(c check.Checker) string {
	if ic, ok := c.(*icmpChecker); ok {
		return ic.socket
	}
	return ""
}

// kindNames returns the kinds b builds (in no particular order).
func (b *Builder) kindNames() []string {
	out := make([]string, 0, len(b.kinds))
	for k := range b.kinds {
		out = append(out, k)
	}
	return out
}
