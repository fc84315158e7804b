package responder

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"lbdns/gslb"
	"lbdns/responder/doh"
)

// rapidReset is the outcome of one HTTP/2 rapid reset connection.
type rapidReset struct {
	sent     int           // streams opened and reset
	writeErr error         // why the writing stopped (nil: all sent)
	goAway   *goAway       // the server's GOAWAY, if any
	readErr  error         // how the reading ended
	closed   bool          // the server closed the connection (not the client after its PING)
	took     time.Duration // from the first stream to the connection's end
	replies  int           // response HEADERS the server sent anyway
}

// goAway is what a GOAWAY frame said.
type goAway struct {
	code  http2.ErrCode
	last  uint32
	debug string
}

// String is the frame as the test logs it.
func (g *goAway) String() string {
	return fmt.Sprintf("%v (last stream %d, %q)", g.code, g.last, g.debug)
}

// rapidResetConn opens an HTTP/2 connection to addr (TLS, ALPN h2) and
// sends up to n streams, each a DoH GET of q reset (RST_STREAM CANCEL)
// right after its HEADERS, as fast as the connection takes them
// (CVE-2023-44487). It returns when the server has closed the
// connection, or when all n are sent and the server has answered a
// PING after them (then it closes the connection itself).
func rapidResetConn(t *testing.T, addr string, pool *tls.Config, q []byte, n int) rapidReset {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	bw := bufio.NewWriterSize(c, 64<<10)
	fr := http2.NewFramer(bw, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	// Large windows: the replies the server sends before it sees a
	// reset never stall it on flow control.
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	// The server's SETTINGS, acknowledged before the flood.
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's settings: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			break
		}
	}
	if err := fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	var out rapidReset
	pong := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				out.readErr = err
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				out.goAway = &goAway{code: f.ErrCode, last: f.LastStreamID, debug: string(f.DebugData())}
			case *http2.MetaHeadersFrame:
				out.replies++
			case *http2.PingFrame:
				if f.IsAck() {
					pong <- struct{}{}
				}
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	path := "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q)
	began := time.Now()
	for i := range n {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: addr}, {Name: ":path", Value: path}, {Name: "accept", Value: doh.MediaDNSMessage}} {
			enc.WriteField(hf)
		}
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		if err == nil {
			err = fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		if err == nil && i%32 == 31 {
			err = bw.Flush()
		}
		if err != nil {
			out.writeErr = err
			break
		}
		out.sent++
	}
	if out.writeErr == nil {
		out.writeErr = fr.WritePing(false, [8]byte{'d', 'o', 'n', 'e'})
		if out.writeErr == nil {
			out.writeErr = bw.Flush()
		}
	}
	select {
	case <-pong: // every stream read by the server, the connection open
		c.Close()
	case <-readDone:
		out.closed = true
	case <-time.After(30 * time.Second):
		c.Close()
	}
	<-readDone
	out.took = time.Since(began)
	return out
}

// stalling is a fake whose answers for name wait until release is
// closed, counting how many wait at once.
type stalling struct {
	*fake
	name    string
	release chan struct{}

	inFlight, peak atomic.Int64
}

// Answer answers as fake does, after release for name.
func (s *stalling) Answer(q gslb.Query) gslb.Response {
	if q.Name == s.name {
		n := s.inFlight.Add(1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		<-s.release
		s.inFlight.Add(-1)
	}
	return s.fake.Answer(q)
}

// underAbuse runs abuse while an ordinary HTTP/2 DoH client of f asks
// www.example.test A on its own connection, one request after the
// other, each within 5s (the server's request timeout), and 5 times
// more after abuse returns. It returns how many it asked, the slowest
// answer and every wrong or missing one.
func underAbuse(t *testing.T, f *fronted, abuse func()) (asked int, slowest time.Duration, problems []error) {
	t.Helper()
	q, err := query("www.example.test.", dns.TypeA, 1232).Pack()
	if err != nil {
		t.Fatal(err)
	}
	c := f.httpClient(t, true)
	c.Timeout = 5 * time.Second
	ask := func() error {
		began := time.Now()
		resp, err := c.Post("https://"+f.doh+"/dns-query", doh.MediaDNSMessage, bytes.NewReader(q))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var m dns.Msg
		if err := m.Unpack(b); err != nil {
			return fmt.Errorf("%s %d: %w", resp.Proto, resp.StatusCode, err)
		}
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
			return fmt.Errorf("%s %d: %v", resp.Proto, resp.StatusCode, &m)
		}
		slowest = max(slowest, time.Since(began))
		return nil
	}
	if err := ask(); err != nil { // its connection is up before the abuse
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := ask(); err != nil {
				problems = append(problems, err)
			}
			asked++
		}
	})
	abuse()
	close(stop)
	wg.Wait()
	for range 5 {
		if err := ask(); err != nil {
			problems = append(problems, fmt.Errorf("after the abuse: %w", err))
		}
	}
	return asked, slowest, problems
}

// TestDoHRapidReset: HTTP/2 rapid reset (CVE-2023-44487). One
// connection opens thousands of DoH streams and resets each at once,
// while an ordinary DoH client on another connection keeps asking; the
// ordinary client gets every answer, right, within its timeout.
// net/http runs at most max_streams handlers of a connection at once
// and queues the streams beyond; it ends the connection with GOAWAY
// ENHANCE_YOUR_CALM once 4 × max_streams wait.
func TestDoHRapidReset(t *testing.T) {
	tlsConf := func(f *fronted) *tls.Config { return &tls.Config{RootCAs: f.pool, NextProtos: []string{"h2"}} }
	// Answers as fast as the resets come: the server answers the
	// streams it sees before their reset like any request, at most
	// max_streams at once; it keeps the connection, or ends it with
	// ENHANCE_YOUR_CALM when its handlers fall behind (a busy host).
	t.Run("fast answers", func(t *testing.T) {
		const streams = 10000
		f := startFronts(t, &fake{}, frontsCfg(nil))
		q, _ := query("www.example.test.", dns.TypeA, 1232).Pack()
		var rr rapidReset
		asked, slowest, problems := underAbuse(t, f, func() { rr = rapidResetConn(t, f.doh, tlsConf(f), q, streams) })
		answered := testutil.ToFloat64(f.srv.Metrics.fronts.Requests("doh", http.StatusOK)) - float64(asked) - 6
		t.Logf("abusive connection: %d streams sent in %v, closed by the server %v (GOAWAY %v, read ended by %v), %d replies; its streams answered %v; ordinary client: %d asked, slowest %v",
			rr.sent, rr.took, rr.closed, rr.goAway, rr.readErr, rr.replies, answered, asked, slowest)
		for _, err := range problems {
			t.Errorf("the ordinary client: %v", err)
		}
		if asked == 0 {
			t.Error("the ordinary client asked nothing while the abuse went on")
		}
		switch {
		case rr.closed && (rr.goAway == nil || rr.goAway.code != http2.ErrCodeEnhanceYourCalm):
			t.Errorf("the server closed the abusive connection with GOAWAY %v (read ended by %v), want ENHANCE_YOUR_CALM or none", rr.goAway, rr.readErr)
		case !rr.closed && (rr.sent != streams || rr.writeErr != nil):
			t.Errorf("the abusive connection stopped after %d streams (%v) without the server closing it", rr.sent, rr.writeErr)
		}
		if answered > float64(rr.sent) {
			t.Errorf("%v answers for %d streams", answered, rr.sent)
		}
	})
	// Answers that stall (a question the answer path takes long for):
	// max_streams handlers run and wait, the streams beyond are queued,
	// and the connection ends with ENHANCE_YOUR_CALM long before its
	// streams are sent. The ordinary client, asking another name, is
	// answered meanwhile.
	t.Run("stalled answers", func(t *testing.T) {
		const streams = 20000
		st := &stalling{fake: &fake{}, name: "slow.example.test.", release: make(chan struct{})}
		defer close(st.release) // before the server's shutdown waits for its handlers
		tc := frontsCfg(nil)
		f := startFronts(t, st, tc)
		q, _ := query(st.name, dns.TypeA, 1232).Pack()
		var rr rapidReset
		asked, slowest, problems := underAbuse(t, f, func() { rr = rapidResetConn(t, f.doh, tlsConf(f), q, streams) })
		t.Logf("abusive connection: %d streams sent in %v, closed by the server %v (GOAWAY %v, read ended by %v), %d replies; answers waiting at most %d at once; ordinary client: %d asked, slowest %v",
			rr.sent, rr.took, rr.closed, rr.goAway, rr.readErr, rr.replies, st.peak.Load(), asked, slowest)
		for _, err := range problems {
			t.Errorf("the ordinary client: %v", err)
		}
		if asked == 0 {
			t.Error("the ordinary client asked nothing while the abuse went on")
		}
		if rr.goAway == nil || rr.goAway.code != http2.ErrCodeEnhanceYourCalm || !rr.closed {
			t.Errorf("the abusive connection ended with GOAWAY %v, closed by the server %v; want ENHANCE_YOUR_CALM and closed", rr.goAway, rr.closed)
		}
		// The streams the server took: max_streams running, 4 ×
		// max_streams + 1 waiting (its bound is "more than 4 ×"), and
		// the one too many.
		if rr.goAway == nil {
			return
		}
		if took := (rr.goAway.last + 1) / 2; took > uint32(5*tc.MaxStreams+2) {
			t.Errorf("the server took %d of the abusive connection's streams (GOAWAY's last stream %d), want at most 5 × max_streams + 2", took, rr.goAway.last)
		}
		if p := st.peak.Load(); p != int64(tc.MaxStreams) {
			t.Errorf("%d of the abusive connection's answers waited at once, want max_streams (%d)", p, tc.MaxStreams)
		}
	})
}
