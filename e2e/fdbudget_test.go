package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/poll"
)

// The figures of TestDescriptorBudget: the descriptor limit lbdnsd runs
// under, and the idle connections opened to its status endpoint and its
// control socket (more than the limit together, as in the report that
// asked for the budget).
const (
	budgetNofile      = 2048
	budgetStatusConns = 2100
	budgetCtlConns    = 200
)

// TestDescriptorBudget runs lbdnsd under prlimit --nofile=2048 with a
// GSLB member up (a TCP listener that accepts), then opens 2,100 idle
// connections to the status endpoint and 200 to the control socket: the
// status endpoint closes the ones within daemon.reserved_fds of the limit
// (reason descriptors), the control socket those beyond its 64 (reason
// limit), so that the member's probes still get descriptors: it stays up
// with no flap, no probe fails for a local reason, and the refusals are
// in lbdns_listener_connections_refused_total.
func TestDescriptorBudget(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	w := newWorld(t, layout{})
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { acceptLoop(probe); close(done) }()
	t.Cleanup(func() { probe.Close(); <-done })
	port, err := vendors.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	// status_max_connections above what the limit allows: the reserve,
	// not the cap, bounds the status endpoint.
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\nstatus_max_connections = 4000\n", w.stateDir, w.socket)
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n\n[check.tcp.tcp]\nport = %d\n",
		probe.Addr().(*net.TCPAddr).Port)
	fmt.Fprintf(&b, "\n[gslb]\npolicy_order = [\"global\"]\n\n[gslb.server]\nlisten = [%q]\n", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port))
	fmt.Fprintf(&b, "\n[[gslb.zone]]\nname = %q\nns = [\"ns1.%s.\"]\n", respZone, respZone)
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = %q\nttl = 300\n\n[[gslb.name.policy]]\npool = \"p\"\n", strings.TrimSuffix(respWWW, "."))
	fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = \"p\"\nmonitors = [\"tcp\"]\n\n[[gslb.pool.member]]\nname = \"m1\"\naddress = \"192.0.2.1\"\nprobe_address = \"127.0.0.1\"\n")
	if err := os.WriteFile(w.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--nofile=" + strconv.Itoa(budgetNofile), "--", binaries.lbdnsd, "-config", w.cfgPath, "-dry-run", "-log-format", "json"}
	d := spawnLbdnsd(t, w.socket, exec.Command(prlimit, args...))
	d.waitReady()
	base := d.statusURL()
	member := func() control.GSLBMonitor {
		t.Helper()
		resp, err := http.Get(base + "/status")
		if err != nil {
			t.Fatalf("GET /status: %v", err)
		}
		defer resp.Body.Close()
		var st control.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("GET /status: %v", err)
		}
		if len(st.GSLB) != 1 || len(st.GSLB[0].Members) != 1 || len(st.GSLB[0].Members[0].Monitors) != 1 {
			t.Fatalf("GET /status: want one pool, member, monitor: %+v", st.GSLB)
		}
		return st.GSLB[0].Members[0].Monitors[0]
	}
	poll.Until(t, startTimeout, "member up", func() (bool, string) {
		m := member()
		return m.State == "up", m.State + " " + m.LastResult
	})
	upSince := member().Since
	http.DefaultClient.CloseIdleConnections()

	// The flood: idle connections, held open.
	statusAddr := strings.TrimPrefix(base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dialAll := func(network, addr string, n int) []net.Conn {
		var out []net.Conn
		for range n {
			c, err := net.DialTimeout(network, addr, time.Second)
			if err != nil {
				t.Fatalf("dial %s %s after %d: %v", network, addr, len(out), err)
			}
			out = append(out, c)
		}
		conns = append(conns, out...)
		return out
	}
	// The control socket first: dialed after the status endpoint took
	// the descriptors up to the reserve, every one would be refused for
	// the reserve, not for its cap.
	ctl := dialAll("unix", w.socket, budgetCtlConns)
	status := dialAll("tcp", statusAddr, budgetStatusConns)
	// The member is probed 5 times a second: 2 s of flood is 10 probes,
	// 5 times its fall.
	time.Sleep(2 * time.Second)
	closedBy := func(cs []net.Conn) int {
		n := 0
		for _, c := range cs {
			_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF || isReset(err) {
				n++
			}
		}
		return n
	}
	statusClosed, ctlClosed := closedBy(status), closedBy(ctl)
	t.Logf("under --nofile=%d: status endpoint closed %d of %d idle connections, control socket %d of %d",
		budgetNofile, statusClosed, budgetStatusConns, ctlClosed, budgetCtlConns)
	if kept := budgetStatusConns - statusClosed; statusClosed == 0 || kept > budgetNofile-1024 {
		t.Errorf("status endpoint kept %d of %d connections open, want at most %d (the limit less daemon.reserved_fds)", kept, budgetStatusConns, budgetNofile-1024)
	}
	if kept := budgetCtlConns - ctlClosed; kept != control.DefaultControlMaxConnections {
		t.Errorf("control socket kept %d connections open, want its cap %d", kept, control.DefaultControlMaxConnections)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	// After the flood: the member never went down, no probe failed, and
	// no probe was short of a descriptor.
	poll.Until(t, startTimeout, "status endpoint answering again", func() (bool, string) {
		resp, err := http.Get(base + "/status")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	m := member()
	if m.State != "up" || !m.Since.Equal(upSince) || !m.LastOK {
		t.Errorf("member after the flood: %s since %v (up since %v before), last %q; want up all along", m.State, m.Since, upSince, m.LastResult)
	}
	for _, l := range d.logLines() {
		if msg, _ := l["msg"].(string); strings.Contains(msg, "prober abstaining") {
			t.Errorf("a probe was short of a descriptor: %v", l)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`listener="status",reason="descriptors"`, `listener="control",reason="limit"`} {
		re := regexp.MustCompile(`lbdns_listener_connections_refused_total\{` + regexp.QuoteMeta(want) + `\} ([0-9]+)`)
		mm := re.FindSubmatch(body)
		if mm == nil || string(mm[1]) == "0" {
			t.Errorf("lbdns_listener_connections_refused_total{%s}: %q, want above 0", want, mm)
		}
	}
}

// isReset reports whether err is a connection reset (a peer that closed
// with data unread).
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
