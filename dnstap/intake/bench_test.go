package intake

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lbdns/dnstap"
	"lbdns/dnstap/fstrm"
)

// benchStream is n client queries and responses from 256 clients for
// 1,000 names, framed as one resolver sends them (READY and START first).
func benchStream(b *testing.B, n int) (handshakeBytes, frames []byte) {
	handshakeBytes = fstrm.AppendControl(nil, fstrm.ControlReady, dnstap.ContentType)
	handshakeBytes = fstrm.AppendControl(handshakeBytes, fstrm.ControlStart, dnstap.ContentType)
	for i := range n {
		typ := dnstap.ClientQuery
		if i%2 == 1 {
			typ = dnstap.ClientResponse
		}
		frames = append(frames, queryFrame(b, "resolver-1.dc1", typ, fmt.Sprintf("10.0.%d.%d:%d", i%256/16, i%16+1, 1024+i%5000), fmt.Sprintf("host%d.app.example.com.", i%1000))...)
	}
	return handshakeBytes, frames
}

// rw is a stream read from a buffer; writes are dropped.
type rw struct{ *bytes.Reader }

func (rw) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkDecode measures the work per message of the intake itself:
// Frame Streams framing and dnstap decoding of one frame, read from
// memory, and the hand-off to a Handler that does nothing.
func BenchmarkDecode(b *testing.B) {
	const n = 4096
	hs, frames := benchStream(b, n)
	stream := append(hs, frames...)
	var d dnstap.Decoder
	var m dnstap.Message
	b.SetBytes(int64(len(frames) / n))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	var r *fstrm.Reader
	for i := 0; i < b.N; i++ {
		if i%n == 0 {
			r = fstrm.NewReader(rw{bytes.NewReader(stream)}, dnstap.ContentType, DefaultMaxFrame, readBuffer)
			if err := r.Handshake(); err != nil {
				b.Fatal(err)
			}
		}
		f, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Decode(f, &m); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/msg")
}

// BenchmarkUnixSocket measures the intake end to end: a writer in this
// process sends frames over a real Unix socket to a Server, which reads,
// decodes and hands them to a Handler that counts. cpu-ns/msg is the
// process's CPU time (user and system, the writer's included) per
// message.
func BenchmarkUnixSocket(b *testing.B) {
	const n = 4096
	hs, frames := benchStream(b, n)
	got := make(chan struct{}, 1)
	count := 0
	rounds := (b.N + n - 1) / n
	target := rounds * n
	srv, err := New(Config{Unix: filepath.Join(b.TempDir(), "bench.sock")}, func(*dnstap.Message) {
		count++
		if count == target {
			got <- struct{}{}
		}
	}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(b.Context())
	c, err := net.Dial("unix", srv.Addrs()[0].String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(hs[:len(hs)/2]); err != nil {
		b.Fatal(err)
	}
	var accept [64]byte
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(accept[:]); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Write(hs[len(hs)/2:]); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range rounds {
		if _, err := c.Write(frames); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-time.After(time.Minute):
		b.Fatal("the server did not hand on every message within a minute")
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(target)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(target), "cpu-ns/msg")
	b.ReportMetric(0, "ns/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
