package probes

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/check"
	"lbdns/configs"
)

// exhaustChildEnv marks the child of TestLocalFailureUnderFDExhaustion.
const exhaustChildEnv = "LBDNS_PROBES_FD_CHILD"

// TestLocalFailureUnderFDExhaustion runs every check kind in a child
// process (the test binary again, so that the lowered RLIMIT_NOFILE and
// the descriptors filled up are its own) against healthy loopback servers
// while no descriptor is left: each check must fail as the prober's own
// (check.CauseDescriptors), never as the target's; once descriptors are
// free again, each must succeed.
func TestLocalFailureUnderFDExhaustion(t *testing.T) {
	if os.Getenv(exhaustChildEnv) == "1" {
		exhaustChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalFailureUnderFDExhaustion$", "-test.v")
	cmd.Env = append(os.Environ(), exhaustChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// exhaustChild is the child's side of TestLocalFailureUnderFDExhaustion.
func exhaustChild(t *testing.T) {
	dnsSrv := startServer(t, func(req *dns.Msg) *dns.Msg { return answer(req, dns.RcodeSuccess, "60 IN A 192.0.2.1") },
		func(req *dns.Msg) *dns.Msg { return answer(req, dns.RcodeSuccess, "60 IN A 192.0.2.1") })
	tcpAddr := tcpServer(t, func(c net.Conn) { c.Close() })
	udpAddr := udpServer(t, func(b []byte) []byte { return b })
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer web.Close()
	webTLS := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer webTLS.Close()

	dnsTCP := fixedCheck()
	dnsTCP.DNS.Transport = "tcp"
	tcpSend := tcpCheck(configs.TCPCheck{Send: "x"})
	httpsChk := httpCheck("https", func(h *configs.HTTPCheck) { h.InsecureSkipVerify = true })
	kinds := []struct {
		name   string
		chk    *configs.Check
		target netip.AddrPort
	}{
		{"dns udp batch", fixedCheck(), dnsSrv.Addr},
		{"dns tcp", dnsTCP, dnsSrv.Addr},
		{"tcp connect engine", tcpCheck(configs.TCPCheck{}), tcpAddr},
		{"tcp with send", tcpSend, tcpAddr},
		{"udp", udpCheck(configs.UDPCheck{Payload: "ping"}), udpAddr},
		{"http engine", httpCheck("http", nil), addrPort(t, web.URL)},
		{"https", httpsChk, addrPort(t, webTLS.URL)},
	}
	run := func(name string, chk *configs.Check, target netip.AddrPort) check.Result {
		p := NewDNSProber() // a batch engine not started yet: it needs a socket
		defer p.Close()
		c, err := NewBuilder(Deps{DNS: p}).Build(chk, target)
		if err != nil {
			t.Fatalf("%s: build: %v", name, err)
		}
		deadline := time.Now().Add(time.Second)
		if a, ok := c.(interface {
			StartCheck(time.Time, func(check.Result))
		}); ok {
			got := make(chan check.Result, 1)
			a.StartCheck(deadline, func(r check.Result) { got <- r })
			return <-got
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		return c.Check(ctx)
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// A low limit, filled with copies of stdin: the next socket() fails.
	lim := old
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var filled []int
	fill := func() {
		for {
			fd, err := syscall.Dup(0)
			if err != nil {
				break
			}
			filled = append(filled, fd)
		}
	}
	results := make([]check.Result, len(kinds))
	for i, k := range kinds {
		// Topped up before each check: a descriptor the runtime or a
		// server goroutine closed meanwhile (a finalizer, a connection
		// of the check before) would let this one open a socket.
		fill()
		results[i] = run(k.name, k.chk, k.target)
	}
	for _, fd := range filled {
		syscall.Close(fd)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	for i, k := range kinds {
		r := results[i]
		t.Logf("%s, no descriptor left: ok=%v cause=%v detail=%q", k.name, r.OK, r.Cause, r.Detail)
		if r.OK || !r.Local() || r.Cause != check.CauseDescriptors {
			t.Errorf("%s with no descriptor left: %+v, want a local failure (descriptors)", k.name, r)
		}
		if r := run(k.name, k.chk, k.target); !r.OK {
			t.Errorf("%s with descriptors again: %+v, want ok", k.name, r)
		}
	}
}
