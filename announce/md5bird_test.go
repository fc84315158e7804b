//go:build linux

package announce_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/control"
	"lbdns/hub"
	"lbdns/testkit/bird"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// events keeps the component's events.
type events struct {
	mu  sync.Mutex
	evs []control.Event
}

func (e *events) Append(ev control.Event) control.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	return ev
}

// TestBirdMD5Mismatch: with a TCP MD5 password that differs from the
// router's (or a password on the router's side only, or ours only), the
// component's status (the bgp section of /status, what lbctl bgp status
// prints) names the mismatch within 15 s, the log warns of it once, and
// a reload with the router's password brings the session up and clears
// the reason. Without a listener of our own only the router's kernel
// sees our SYNs dropped: the status says an MD5 mismatch is the likely
// cause.
func TestBirdMD5Mismatch(t *testing.T) {
	cases := []struct {
		name, router, ours string
		listen             bool
		code, counter      string
	}{
		{"different passwords", "s3cret", "wrong", true, announce.ReasonMD5Mismatch, "TCPMD5Failure"},
		{"a password on the router only", "s3cret", "", true, announce.ReasonMD5Mismatch, "TCPMD5Unexpected"},
		{"a password here only", "", "s3cret", true, announce.ReasonMD5Mismatch, "TCPMD5NotFound"},
		{"different passwords, not listening", "s3cret", "wrong", false, announce.ReasonNoReplyPassword, "likely cause"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := ""
			if c.router != "" {
				extra = fmt.Sprintf("\tpassword %q;\n", c.router)
			}
			port := -1
			if c.listen {
				l, err := net.Listen("tcp", "0.0.0.0:0")
				if err != nil {
					t.Fatal(err)
				}
				port = l.Addr().(*net.TCPAddr).Port
				l.Close()
				// The router connects to our port too, as routers do.
				extra += fmt.Sprintf("\tneighbor port %d;\n", port)
			}
			b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, Extra: extra})
			cfg := bgpConfig(b, time.Second)
			cfg.BGP.ListenPort = port
			cfg.BGP.Peers[0].Password = c.ours
			h := hub.New(func() hub.Facts { return nil })
			h.Config.Publish(cfg)
			logs := &testlog.Buffer{}
			evs := &events{}
			p, err := announce.NewPart(announce.PartOptions{Hub: h, Events: evs, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := p.Run(ctx)
			t.Cleanup(func() { cancel(); <-done })
			h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false)})

			start := time.Now()
			var peer control.BGPPeer
			poll.Until(t, 15*time.Second, "the status names the mismatch", func() (bool, string) {
				st := p.Status()
				if st == nil || len(st.Peers) != 1 {
					return false, fmt.Sprintf("%+v", st)
				}
				peer = st.Peers[0]
				return peer.ReasonCode == c.code, fmt.Sprintf("%+v", peer)
			})
			t.Logf("named after %v: %s: %s", time.Since(start).Round(time.Millisecond), peer.State, peer.Reason)
			if peer.State == announce.StateEstablished || !strings.Contains(peer.Reason, c.counter) || !strings.Contains(peer.Reason, "check [[bgp.peer]] password against the router's") {
				t.Errorf("reason %q (state %s), want %s named", peer.Reason, peer.State, c.counter)
			}
			if c.listen && !strings.Contains(peer.Reason, "from "+b.Host().AddrV4().String()+":") {
				t.Errorf("reason %q does not name the router", peer.Reason)
			}
			// Several retries later the warning is still one line.
			time.Sleep(6 * time.Second)
			if st := p.Status(); st.Peers[0].ReasonCode != c.code {
				t.Errorf("reason went: %+v", st.Peers[0])
			}
			// One line when it is first seen; one more at most when the
			// evidence firms up (no reply at first, then the router's
			// segments dropped).
			if n := strings.Count(logs.String(), "not established: "+peer.Reason[:20]); n != 1 {
				t.Errorf("the warning was logged %d times, want once:\n%s", n, logs.String())
			}
			if n := strings.Count(logs.String(), "not established: "); n > 2 {
				t.Errorf("%d warnings of a session not established, want at most 2:\n%s", n, logs.String())
			}

			fixed := *cfg
			fixed.BGP.Peers = append(fixed.BGP.Peers[:0:0], cfg.BGP.Peers...)
			fixed.BGP.Peers[0].Password = c.router
			h.Config.Publish(&fixed)
			b.WaitRoute("route announced once the passwords agree", "192.0.2.53/32", "100", "(65001,100)")
			poll.Until(t, 5*time.Second, "the reason cleared", func() (bool, string) {
				st := p.Status()
				return st.Peers[0].State == announce.StateEstablished && st.Peers[0].Reason == "" && st.Peers[0].ReasonCode == "", fmt.Sprintf("%+v", st.Peers[0])
			})
			if testing.Verbose() {
				t.Logf("log:\n%s", logs.String())
			}
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "not established") && !strings.Contains(line, "level=WARN") {
					t.Errorf("not a warning: %s", line)
				}
			}
		})
	}
}
