package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/dnstap"
	"lbdns/dnstap/fstrm"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// consumer collects what the daemon hands to its DnstapConsumer.
type consumer struct {
	mu    sync.Mutex
	names []string
}

func (c *consumer) ObserveDnstap(m *dnstap.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, m.Client.String()+" "+m.Name)
}

func (c *consumer) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// sendDnstap sends one CLIENT_QUERY per name from client over a new
// connection to network/addr, with the whole handshake and STOP.
func sendDnstap(t *testing.T, network, addr, identity, client string, names ...string) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	w := fstrm.NewWriter(c, dnstap.ContentType)
	if err := w.Handshake(); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, name := range names {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		wire, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		b = fstrm.AppendData(b, dnstap.AppendPayload(nil, dnstap.Payload{Identity: identity, Type: dnstap.ClientQuery,
			Client: netip.MustParseAddrPort(client), Time: time.Now(), DNS: wire}))
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestDnstapIntake: with [dnstap] the daemon listens on the Unix socket
// and TCP address of the configuration, hands every client message to
// its DnstapConsumer, counts it, and shows the senders in its status; a
// reload that changes [dnstap] keeps the running listeners.
func TestDnstapIntake(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "dnstap.sock")
	extra := fmt.Sprintf("\n[dnstap]\nunix = %q\ntcp = \"127.0.0.1:0\"\nmax_connections = 8\n", sock)
	path := writeConfig(t, dir, extra)
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	cons := &consumer{}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond, Dnstap: cons})
	if err != nil {
		t.Fatal(err)
	}
	h := run(t, d, fp, nil)

	st, err := d.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Dnstap == nil || len(st.Dnstap.Listeners) != 2 || st.Dnstap.Listeners[0] != sock {
		t.Fatalf("status dnstap %+v, want the socket and a TCP address", st.Dnstap)
	}
	tcpAddr := st.Dnstap.Listeners[1]

	sendDnstap(t, "unix", sock, "unbound-1", "10.0.0.1:5000", "a.example.", "b.example.")
	sendDnstap(t, "tcp", tcpAddr, "bind-1", "[2001:db8::7]:5000", "c.example.")
	poll.Until(t, 5*time.Second, "three messages at the consumer", func() (bool, string) {
		got := cons.got()
		return len(got) == 3, fmt.Sprint(got)
	})
	if n := counterValue(t, d.Registry(), "lbdns_dnstap_messages_total", "type", "client_query"); n != 3 {
		t.Errorf("lbdns_dnstap_messages_total{type=client_query} = %v, want 3", n)
	}
	// The flood pipeline counted them too, under the dnstap source.
	poll.Until(t, 5*time.Second, "the dnstap queries in the flood heavy hitters", func() (bool, string) {
		rep, err := d.flood.Top(context.Background(), "dnstap", "clients", 10*time.Second)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]uint64{}
		for _, e := range rep.Entries {
			got[e.Key] = e.Count
		}
		return got["10.0.0.1"] == 2 && got["2001:db8::7"] == 1 && d.Flood().Counters().Queries["dnstap"] == 3, fmt.Sprint(got, d.Flood().Counters().Queries)
	})
	st, err = d.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Dnstap.Senders) != 2 || st.Dnstap.Senders[0].Identity != "bind-1" || st.Dnstap.Senders[1].Messages != 2 ||
		st.Dnstap.Senders[1].Recent[0].Name != "b.example." || st.Dnstap.Senders[1].Recent[0].Client != "10.0.0.1" || st.Dnstap.Senders[1].Recent[0].QType != "A" {
		t.Errorf("status senders %+v", st.Dnstap.Senders)
	}

	// A reload with another [dnstap] keeps the running intake.
	if err := os.WriteFile(path, []byte(fmt.Sprintf(testConfig, filepath.Join(dir, "state"), "\n[dnstap]\ntcp = \"127.0.0.1:0\"\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendDnstap(t, "unix", sock, "unbound-1", "10.0.0.1:5000", "d.example.")
	poll.Until(t, 5*time.Second, "the fourth message after the reload", func() (bool, string) {
		got := cons.got()
		return len(got) == 4, fmt.Sprint(got)
	})

	h.stop()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left after stop: %v", err)
	}
}

// TestDnstapListenError: a [dnstap] address that cannot be bound fails
// New with the key to fix.
func TestDnstapListenError(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf("\n[dnstap]\nunix = %q\n", filepath.Join(dir, "missing", "dnstap.sock")))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	_, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify})
	if err == nil {
		t.Fatal("New succeeded with a socket in a missing directory")
	}
	t.Log(err)
	// The control socket was closed again: a second daemon can take it.
	path = writeConfig(t, dir, "")
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify})
	if err != nil {
		t.Fatalf("the control socket was left open: %v", err)
	}
	d.closeListeners()
}
