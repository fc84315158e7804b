//go:build linux

package probes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/configs"
	"lbdns/testkit/netns"
)

// These tests ping hosts in network namespaces (testkit/netns) and break
// the path for real: link down, tc netem loss. They need root and skip
// without it, unless LBDNS_REQUIRE_NETNS=1.

// checkWithin runs one check of c with a deadline of d.
func checkWithin(t *testing.T, c interface {
	Check(context.Context) Result
}, d time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Check(ctx)
}

// setPingGroups sets net.ipv4.ping_group_range inside h (it is per network
// namespace), which decides who may open unprivileged ping sockets there.
func setPingGroups(t *testing.T, h *netns.Host, groups string) {
	t.Helper()
	if out, err := h.Command("sysctl", "-q", "-w", "net.ipv4.ping_group_range="+groups).CombinedOutput(); err != nil {
		t.Fatalf("sysctl ping_group_range in %s: %v: %s", h.Name(), err, out)
	}
}

func TestICMPNetnsLinkDown(t *testing.T) {
	t.Parallel()
	h := netns.New(t, "icmp-link")
	c := buildICMP(t, icmpCheck(3, 20*time.Millisecond, 500*time.Millisecond, 34, configs.ICMPAuto), h.AddrV4())
	wantEchoes(t, checkWithin(t, c, 500*time.Millisecond), 3, icmpMode(c))

	h.LinkDown()
	r := checkWithin(t, c, 500*time.Millisecond)
	// With the link down the route is gone: the first send fails
	// ("sendto: network is unreachable"), or the echoes go unanswered.
	if _, recv := echoCounts(r); r.OK || recv > 0 || r.Detail == "" {
		t.Fatalf("link down: %+v, want a failure without replies", r)
	}
	t.Logf("link down: %s", r.Detail)

	h.LinkUp()
	wantEchoes(t, checkWithin(t, c, 500*time.Millisecond), 3, icmpMode(c))
}

func TestICMPNetnsLoss(t *testing.T) {
	t.Parallel()
	h := netns.New(t, "icmp-loss")
	c := buildICMP(t, icmpCheck(3, 20*time.Millisecond, 400*time.Millisecond, 34, configs.ICMPAuto), h.AddrV4())

	h.Netem(100, 0)
	r := checkWithin(t, c, 400*time.Millisecond)
	if r.OK || lossOf(r) != 100 || r.Detail != "no reply to 3 echoes (timeout after 400ms)" {
		t.Fatalf("100%% loss: %+v, want a failure: no reply to 3 echoes (timeout after 400ms)", r)
	}

	h.ClearNetem()
	wantEchoes(t, checkWithin(t, c, 400*time.Millisecond), 3, icmpMode(c))

	// 50% loss of 20 echoes: a tolerant threshold (90%) fails only when 19
	// or 20 are lost (probability 21/2^20, about 2e-5) and a strict one
	// (10%) passes only when at most 2 are lost (211/2^20, about 2e-4).
	h.Netem(50, 0)
	tolerant := buildICMP(t, icmpCheck(20, 5*time.Millisecond, 500*time.Millisecond, 90, configs.ICMPAuto), h.AddrV4())
	strict := buildICMP(t, icmpCheck(20, 5*time.Millisecond, 500*time.Millisecond, 10, configs.ICMPAuto), h.AddrV4())
	var rt, rs Result
	var wg sync.WaitGroup
	wg.Go(func() { rt = checkWithin(t, tolerant, 500*time.Millisecond) })
	wg.Go(func() { rs = checkWithin(t, strict, 500*time.Millisecond) })
	wg.Wait()
	for _, r := range []Result{rt, rs} {
		if sent, recv := echoCounts(r); sent != 20 || lossOf(r) != float64(sent-recv)/float64(sent)*100 {
			t.Errorf("50%% loss: %+v, want 20 sent and loss = lost/sent", r)
		}
	}
	if !rt.OK {
		t.Errorf("50%% loss, max_loss_percent 90: %+v, want OK", rt)
	}
	if rs.OK || !strings.Contains(rs.Detail, "above max_loss_percent 10") {
		t.Errorf("50%% loss, max_loss_percent 10: %+v, want a failure above max_loss_percent 10", rs)
	}
	t.Logf("50%% loss: %s / %s", rt.Detail, rs.Detail)
}

func TestICMPNetnsIPv6(t *testing.T) {
	t.Parallel()
	h := netns.New(t, "icmp-v6")
	c := buildICMP(t, icmpCheck(3, 20*time.Millisecond, time.Second, 34, configs.ICMPAuto), h.AddrV6())
	wantEchoes(t, checkWithin(t, c, time.Second), 3, icmpMode(c))

	// The context's deadline, shorter than the check's timeout, bounds
	// the probe.
	h.Netem(100, 0)
	start := time.Now()
	r := checkWithin(t, c, 300*time.Millisecond)
	if r.OK || r.Detail != "no reply to 3 echoes (timeout after 300ms)" {
		t.Fatalf("100%% loss: %+v, want no reply to 3 echoes (timeout after 300ms)", r)
	}
	// pro-bing's reader polls with read deadlines of up to about 100ms,
	// so a probe can end that much after its deadline.
	if el := time.Since(start); el > 600*time.Millisecond {
		t.Errorf("probe took %v, want about the context's 300ms", el)
	} else {
		t.Logf("probe with a 300ms deadline took %v", el)
	}
}

// TestICMPNetnsUnprivileged pings from inside a namespace whose
// ping_group_range admits root's group, on unprivileged ping sockets
// (SOCK_DGRAM, IPPROTO_ICMP/ICMPV6). Linux replaces the echo ID of such a
// socket with its own (the socket's "port") and delivers it only the
// replies carrying that ID, so a prober that kept matching replies to the
// ID it chose would count none of them: here every live checker must
// count all its echoes, checkers running at once must not count each
// other's, and a silent target must count none.
func TestICMPNetnsUnprivileged(t *testing.T) {
	t.Parallel()
	h := netns.New(t, "icmp-unpriv")
	setPingGroups(t, h, "0 2147483647")
	chk := icmpCheck(3, 20*time.Millisecond, 500*time.Millisecond, 0, configs.ICMPUnprivileged)
	// The root namespace's ends of the link answer; the next address of
	// the Host's IPv6 /64 is on the link but nobody's: no reply.
	live4, live6, silent := h.RootAddrV4(), h.RootAddrV6(), h.AddrV6().Next()
	type job struct {
		name   string
		target netip.Addr
		want   int
	}
	var jobs []job
	for i := range 4 {
		jobs = append(jobs, job{fmt.Sprintf("v4-%d", i), live4, 3}, job{fmt.Sprintf("v6-%d", i), live6, 3})
	}
	jobs = append(jobs, job{"silent-0", silent, 0}, job{"silent-1", silent, 0})

	results := make([]Result, len(jobs))
	modes := make([]string, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			// Build and Check inside the Host: the socket is opened
			// there (pro-bing's reader and sender only use it).
			errs[i] = h.Run(func() error {
				c, err := NewBuilder(Deps{}).Build(chk, netip.AddrPortFrom(j.target, 0))
				if err != nil {
					return err
				}
				modes[i] = icmpMode(c)
				ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
				defer cancel()
				results[i] = c.Check(ctx)
				return nil
			})
		})
	}
	wg.Wait()
	for i, j := range jobs {
		r := results[i]
		switch {
		case errs[i] != nil:
			t.Errorf("%s: %v", j.name, errs[i])
		case modes[i] != configs.ICMPUnprivileged:
			t.Errorf("%s: icmpMode = %q, want unprivileged", j.name, modes[i])
		case j.want == 3:
			if sent, recv := echoCounts(r); !r.OK || sent != 3 || recv != 3 || !strings.HasSuffix(r.Detail, "(unprivileged ping socket)") {
				t.Errorf("%s: %+v, want 3/3 echoes on an unprivileged ping socket", j.name, r)
			}
		default:
			if sent, recv := echoCounts(r); r.OK || sent != 3 || recv != 0 {
				t.Errorf("%s: %+v, want no reply to 3 echoes", j.name, r)
			}
		}
	}
}

// TestICMPNetnsNoSocket: with CAP_NET_RAW dropped (on one thread: Linux
// capabilities are per thread) and ping_group_range "1 0" (nobody), no
// ICMP socket opens, and Build says how to allow each kind.
func TestICMPNetnsNoSocket(t *testing.T) {
	t.Parallel()
	h := netns.New(t, "icmp-nosock")
	setPingGroups(t, h, "1 0")
	var errAuto, errRaw, errUnpriv, errBuild error
	err := h.Run(func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var saved [2]unix.CapUserData
		if err := unix.Capget(&hdr, &saved[0]); err != nil {
			return fmt.Errorf("capget: %w", err)
		}
		dropped := saved
		dropped[0].Effective &^= 1 << unix.CAP_NET_RAW
		if err := unix.Capset(&hdr, &dropped[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
		_, errAuto = ICMPSocket(configs.ICMPAuto, false)
		_, errRaw = ICMPSocket(configs.ICMPRaw, true)
		_, errUnpriv = ICMPSocket(configs.ICMPUnprivileged, false)
		_, errBuild = NewBuilder(Deps{}).Build(icmpCheck(3, 20*time.Millisecond, time.Second, 34, configs.ICMPAuto), netip.AddrPortFrom(h.RootAddrV4(), 0))
		// Restore before the thread goes back to the runtime.
		if err := unix.Capset(&hdr, &saved[0]); err != nil {
			return fmt.Errorf("capset restore: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantBoth := `cannot open an IPv4 ICMP socket: unprivileged ping socket: permission denied (needs the process's group in net.ipv4.ping_group_range`
	// auto names both ways: the ping socket it tried first, then raw.
	thenRaw := "); raw socket: operation not permitted (needs CAP_NET_RAW)"
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"auto", errAuto, []string{wantBoth, thenRaw}},
		{"build", errBuild, []string{`probes: check "ping": ` + wantBoth, thenRaw}},
		{"raw", errRaw, []string{"cannot open an IPv6 ICMP socket: raw socket: operation not permitted (needs CAP_NET_RAW)"}},
		{"unprivileged", errUnpriv, []string{"cannot open an IPv4 ICMP socket: unprivileged ping socket: permission denied (needs the process's group in net.ipv4.ping_group_range"}},
	} {
		for _, w := range tc.want {
			if tc.err == nil || !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: err = %v, want %q", tc.name, tc.err, w)
			}
		}
	}
	if errRaw != nil && strings.Contains(errRaw.Error(), "ping_group_range") {
		t.Errorf("forced raw: %v names the ping socket", errRaw)
	}
}
