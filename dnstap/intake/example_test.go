package intake_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/miekg/dns"

	"lbdns/dnstap"
	"lbdns/dnstap/fstrm"
	"lbdns/dnstap/intake"
)

// ExampleServer listens on a Unix socket and prints each client message;
// a resolver's part is played by fstrm.Writer.
func ExampleServer() {
	dir, err := os.MkdirTemp("", "dnstap")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "dnstap.sock")

	srv, err := intake.New(intake.Config{Unix: sock}, func(m *dnstap.Message) {
		fmt.Println(m.Identity, m.Type, m.Client, m.Name, dns.TypeToString[m.QType])
	}, nil, nil)
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	// The resolver's side: handshake, one CLIENT_QUERY, STOP.
	c, err := net.Dial("unix", sock)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion("www.example.com.", dns.TypeAAAA)
	wire, _ := q.Pack()
	w := fstrm.NewWriter(c, dnstap.ContentType)
	frame := fstrm.AppendData(nil, dnstap.AppendPayload(nil, dnstap.Payload{
		Identity: "resolver-1", Type: dnstap.ClientQuery, Client: netip.MustParseAddrPort("192.0.2.7:40000"), Time: time.Now(), DNS: wire,
	}))
	if err := w.Handshake(); err != nil {
		panic(err)
	}
	if err := w.Write(frame); err != nil {
		panic(err)
	}
	if err := w.Stop(); err != nil { // FINISH comes after the message was handled
		panic(err)
	}
	// Output: resolver-1 client_query 192.0.2.7 www.example.com. AAAA
}
