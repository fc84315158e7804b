package announce

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	r1 = netip.MustParseAddr("198.51.100.254")
	r2 = netip.MustParseAddr("198.51.100.253")
)

// TestMD5Diag steps the diagnosis through samples: which counter rose,
// which peers were down and with what password, and the time.
func TestMD5Diag(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	down := func(a netip.Addr, pw bool) diagPeer { return diagPeer{Addr: a, Port: 179, Password: pw} }
	up := func(a netip.Addr, pw bool) diagPeer {
		return diagPeer{Addr: a, Port: 179, Password: pw, Established: true}
	}
	type sample struct {
		at    time.Duration
		c     tcpCounters
		ok    bool
		syns  []synSent
		peers []diagPeer
		want  map[netip.Addr]string // code, then words the text must hold ("|"-separated)
	}
	cases := []struct {
		name    string
		samples []sample
	}{
		{"failure with one peer down and a password", []sample{
			{0, tcpCounters{Failure: 7}, true, nil, []diagPeer{down(r1, true)}, nil}, // the baseline: nothing rose yet
			{time.Second, tcpCounters{Failure: 9}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch +
				"|TCP MD5 signature mismatch with the router: it signs with another password (the kernel dropped 2 segments from 198.51.100.254: TCPMD5Failure rose); check [[bgp.peer]] password against the router's"}},
			{2 * time.Second, tcpCounters{Failure: 10}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|dropped 3 segments"}},
			{time.Minute, tcpCounters{Failure: 10}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|dropped 3 segments"}}, // held
			{3 * time.Minute, tcpCounters{Failure: 10}, true, nil, []diagPeer{down(r1, true)}, nil},                                                              // no evidence for md5Hold
		}},
		{"established clears", []sample{
			{0, tcpCounters{}, true, nil, []diagPeer{down(r1, true)}, nil},
			{time.Second, tcpCounters{NotFound: 1}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|it sends no signature|1 segment from|TCPMD5NotFound rose"}},
			{2 * time.Second, tcpCounters{NotFound: 1}, true, nil, []diagPeer{up(r1, true)}, nil},
		}},
		{"unexpected: the router signs, no password here", []sample{
			{0, tcpCounters{Unexpected: 5}, true, nil, []diagPeer{down(r1, false)}, nil},
			{time.Second, tcpCounters{Unexpected: 8}, true, nil, []diagPeer{down(r1, false)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|it signs, and no password is set here|3 segments|TCPMD5Unexpected rose"}},
		}},
		{"a counter about signed sessions is not pinned on a peer without a password", []sample{
			{0, tcpCounters{}, true, nil, []diagPeer{down(r1, false), down(r2, true)}, nil},
			{time.Second, tcpCounters{Failure: 2}, true, nil, []diagPeer{down(r1, false), down(r2, true)}, map[netip.Addr]string{r2: ReasonMD5Mismatch + "|from 198.51.100.253:"}},
		}},
		{"several down: one of them", []sample{
			{0, tcpCounters{}, true, nil, []diagPeer{down(r1, true), down(r2, true), up(netip.MustParseAddr("198.51.100.252"), true)}, nil},
			{time.Second, tcpCounters{Failure: 4}, true, nil, []diagPeer{down(r1, true), down(r2, true), up(netip.MustParseAddr("198.51.100.252"), true)}, map[netip.Addr]string{
				r1: ReasonMD5Mismatch + "|this router or another one not established|one of 198.51.100.254, 198.51.100.253, the counters are per host",
				r2: ReasonMD5Mismatch + "|one of 198.51.100.253, 198.51.100.254"}},
		}},
		{"nothing down: a rise is not ours", []sample{
			{0, tcpCounters{}, true, nil, []diagPeer{up(r1, true)}, nil},
			{time.Second, tcpCounters{Failure: 4}, true, nil, []diagPeer{up(r1, true)}, nil},
			{2 * time.Second, tcpCounters{Failure: 4}, true, nil, []diagPeer{down(r1, true)}, nil}, // the rise happened while it was up
		}},
		{"unreadable counters: no baseline, no verdict", []sample{
			{0, tcpCounters{}, false, nil, []diagPeer{down(r1, true)}, nil},
			{time.Second, tcpCounters{Failure: 4}, true, nil, []diagPeer{down(r1, true)}, nil},
			{2 * time.Second, tcpCounters{Failure: 1}, true, nil, []diagPeer{down(r1, true)}, nil}, // went back: a new namespace
			{3 * time.Second, tcpCounters{Failure: 2}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|1 segment"}},
		}},
		{"unanswered SYN with a password: likely", []sample{
			{0, tcpCounters{}, true, []synSent{{netip.AddrPortFrom(r1, 179), 0}}, []diagPeer{down(r1, true)}, nil}, // not retransmitted yet
			{time.Second, tcpCounters{}, true, []synSent{{netip.AddrPortFrom(r1, 179), 1}}, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonNoReplyPassword +
				"|no reply to our connection attempts while a TCP MD5 password is set (our SYN unanswered after 1 retransmission, and nothing from the router dropped here): a signature mismatch is the likely cause if the router is up; check [[bgp.peer]] password against the router's"}},
			{2 * time.Second, tcpCounters{}, true, []synSent{{netip.AddrPortFrom(r1, 1790), 3}}, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonNoReplyPassword + "|after 1 retransmission,"}}, // another port: not its session
			{3 * time.Second, tcpCounters{Failure: 1}, true, nil, []diagPeer{down(r1, true)}, map[netip.Addr]string{r1: ReasonMD5Mismatch + "|1 segment"}},                                                  // the counters beat it
		}},
		{"unanswered SYN without a password", []sample{
			{0, tcpCounters{}, true, []synSent{{netip.AddrPortFrom(r1, 179), 2}}, []diagPeer{down(r1, false)}, map[netip.Addr]string{r1: ReasonNoReply + "|the router is down, or it or a firewall drops them"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d md5Diag
			for i, s := range c.samples {
				got := d.observe(t0.Add(s.at), s.c, s.ok, s.syns, s.peers)
				if len(got) != len(s.want) {
					t.Fatalf("sample %d: got %v, want %d reasons", i, got, len(s.want))
				}
				for a, w := range s.want {
					parts := strings.Split(w, "|")
					r, ok := got[a]
					if !ok || r.Code != parts[0] {
						t.Fatalf("sample %d: %s: got %+v, want code %s", i, a, r, parts[0])
					}
					for _, p := range parts[1:] {
						if !strings.Contains(r.Text, p) {
							t.Errorf("sample %d: %s: %q lacks %q", i, a, r.Text, p)
						}
					}
				}
			}
		})
	}
}

// TestMD5DiagForget: a peer configured anew (another password) loses
// the evidence about the old one.
func TestMD5DiagForget(t *testing.T) {
	t0 := time.Now()
	var d md5Diag
	p := []diagPeer{{Addr: r1, Port: 179, Password: true}}
	d.observe(t0, tcpCounters{}, true, nil, p)
	if got := d.observe(t0.Add(time.Second), tcpCounters{Failure: 1}, true, nil, p); got[r1].Code != ReasonMD5Mismatch {
		t.Fatalf("got %v", got)
	}
	d.forget(r1)
	if got := d.observe(t0.Add(2*time.Second), tcpCounters{Failure: 1}, true, nil, p); len(got) != 0 {
		t.Fatalf("after forget: %v", got)
	}
}

func TestParseNetstat(t *testing.T) {
	in := "TcpExt: SyncookiesSent TCPMD5NotFound TCPMD5Unexpected TCPMD5Failure Other\n" +
		"TcpExt: 1 2 3 4 5\n" +
		"IpExt: InNoRoutes\nIpExt: 0\n"
	c, err := parseNetstat(strings.NewReader(in))
	if err != nil || c != (tcpCounters{NotFound: 2, Unexpected: 3, Failure: 4}) {
		t.Fatalf("got %+v, %v", c, err)
	}
	if _, err := parseNetstat(strings.NewReader("TcpExt: A\nTcpExt: 1\n")); err == nil {
		t.Errorf("a kernel without the counters: no error")
	}
}

func TestParseProcTCP(t *testing.T) {
	// The kernel prints each 32-bit word of the address as the host
	// reads it: on a little-endian host 127.0.0.1 is 0100007F.
	in := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:D431 0100007F:00B3 02 00000001:00000000 01:00000123 00000002     0        0 12345 1\n" +
		"   1: 0100007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12346 1\n"
	got, err := parseProcTCP(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddrPort("127.0.0.1:179")
	if isBigEndian() {
		want = netip.MustParseAddrPort("1.0.0.127:179")
	}
	if len(got) != 1 || got[0].Remote != want || got[0].Retransmits != 2 {
		t.Fatalf("got %+v", got)
	}
	in6 := "  sl  local_address                         remote_address                        st\n" +
		"   0: 00000000000000000000000001000000:D431 0000000000000000FFFF00000100007F:00B3 02 00000001:00000000 01:00000123 00000001     0        0 1 1\n"
	got, err = parseProcTCP(strings.NewReader(in6))
	if err != nil {
		t.Fatal(err)
	}
	if !isBigEndian() && (len(got) != 1 || got[0].Remote != want || got[0].Retransmits != 1) {
		t.Fatalf("tcp6: got %+v", got)
	}
}

func isBigEndian() bool { return binary.NativeEndian.Uint16([]byte{0, 1}) == 1 }
