package fstrm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

const ct = "protobuf:dnstap.Dnstap"

// conn is a stream read from in and written to out.
type conn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *conn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.out.Write(p) }

func newConn(b []byte) *conn { return &conn{in: bytes.NewReader(b)} }

// readAll runs the handshake and reads frames until an error.
func readAll(c *conn, maxFrame int) ([][]byte, error) {
	r := NewReader(c, ct, maxFrame, 0)
	if err := r.Handshake(); err != nil {
		return nil, err
	}
	var frames [][]byte
	for {
		f, err := r.Next()
		if err != nil {
			return frames, err
		}
		frames = append(frames, bytes.Clone(f))
	}
}

func TestStreams(t *testing.T) {
	ready := AppendControl(nil, ControlReady, "other", ct)
	start := AppendControl(nil, ControlStart, ct)
	stop := AppendControl(nil, ControlStop)
	data := func(s string) []byte { return AppendData(nil, []byte(s)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	accept := AppendControl(nil, ControlAccept, ct)
	finish := AppendControl(nil, ControlFinish)

	tests := []struct {
		name    string
		in      []byte
		frames  []string
		err     error
		written []byte
	}{
		{"bidirectional", cat(ready, start, data("a"), data("bc"), stop), []string{"a", "bc"}, io.EOF, cat(accept, finish)},
		{"bidirectional start without content type", cat(ready, AppendControl(nil, ControlStart), data("a"), stop), []string{"a"}, io.EOF, cat(accept, finish)},
		{"unidirectional", cat(start, data("x"), stop), []string{"x"}, io.EOF, nil},
		{"no stop", cat(ready, start, data("a")), []string{"a"}, io.ErrUnexpectedEOF, accept},
		{"truncated frame", cat(ready, start, data("abc")[:6]), nil, io.ErrUnexpectedEOF, accept},
		{"wrong content type in ready", cat(AppendControl(nil, ControlReady, "protobuf:other"), start), nil, ErrContentType, nil},
		{"ready without content type", cat(AppendControl(nil, ControlReady), start), nil, ErrContentType, nil},
		{"wrong content type in start", cat(AppendControl(nil, ControlStart, "x")), nil, ErrContentType, nil},
		{"wrong content type in start after ready", cat(ready, AppendControl(nil, ControlStart, "x")), nil, ErrContentType, accept},
		{"data first", cat(data("a"), start), nil, ErrProtocol, nil},
		{"stop first", cat(stop), nil, ErrProtocol, nil},
		{"ready twice", cat(ready, ready), nil, ErrProtocol, accept},
		{"too large", cat(start, data("12345")), nil, ErrFrameTooLarge, nil},
		{"at the cap", cat(start, data("1234"), stop), []string{"1234"}, io.EOF, nil},
		{"unknown control", cat(start, []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 9}), nil, ErrProtocol, nil},
		{"ready in data", cat(start, ready), nil, ErrProtocol, nil},
		{"huge control", cat([]byte{0, 0, 0, 0, 0, 0, 2, 1}), nil, ErrProtocol, nil},
		{"short control", cat([]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0}), nil, ErrProtocol, nil},
		{"field truncated", cat([]byte{0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0, 0, 1}), nil, ErrProtocol, nil},
		{"field longer than frame", cat([]byte{0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 9}), nil, ErrProtocol, nil},
		{"unknown field", cat([]byte{0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0}), nil, ErrProtocol, nil},
		{"stop with content type", cat(start, AppendControl(nil, ControlStop, ct)), nil, ErrProtocol, nil},
		{"empty", nil, nil, io.EOF, nil},
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), nil, ErrProtocol, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConn(tt.in)
			frames, err := readAll(c, 4)
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if len(frames) != len(tt.frames) {
				t.Fatalf("frames %q, want %q", frames, tt.frames)
			}
			for i := range frames {
				if string(frames[i]) != tt.frames[i] {
					t.Errorf("frame %d: %q, want %q", i, frames[i], tt.frames[i])
				}
			}
			if !bytes.Equal(c.out.Bytes(), tt.written) {
				t.Errorf("written %x, want %x", c.out.Bytes(), tt.written)
			}
		})
	}
}

func TestBidirectional(t *testing.T) {
	c := newConn(bytes.Join([][]byte{AppendControl(nil, ControlReady, ct), AppendControl(nil, ControlStart, ct)}, nil))
	r := NewReader(c, ct, 10, 0)
	if r.Bidirectional() {
		t.Fatal("bidirectional before the handshake")
	}
	if err := r.Handshake(); err != nil {
		t.Fatal(err)
	}
	if !r.Bidirectional() {
		t.Error("READY then START: not bidirectional")
	}
}

func TestNextBeforeHandshake(t *testing.T) {
	r := NewReader(newConn(AppendData(nil, []byte("a"))), ct, 10, 0)
	if _, err := r.Next(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Next before Handshake: %v, want ErrProtocol", err)
	}
}

func TestParseControlRoundTrip(t *testing.T) {
	b := AppendControl(nil, ControlReady, "a", "bb")
	typ, types, err := ParseControl(b[8:])
	if err != nil || typ != ControlReady || len(types) != 2 || types[0] != "a" || types[1] != "bb" {
		t.Fatalf("ParseControl = %d %q %v", typ, types, err)
	}
}

// FuzzReader feeds arbitrary streams to a Reader: it must end with an
// error (never panic, never hang), return frames within the cap, and
// write only ACCEPT and FINISH.
func FuzzReader(f *testing.F) {
	ready := AppendControl(nil, ControlReady, ct)
	start := AppendControl(nil, ControlStart, ct)
	stop := AppendControl(nil, ControlStop)
	f.Add(bytes.Join([][]byte{ready, start, AppendData(nil, []byte("hello")), stop}, nil))
	f.Add(bytes.Join([][]byte{start, AppendData(nil, []byte("x")), stop}, nil))
	f.Add(AppendControl(nil, ControlReady, "x", "y"))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newConn(b)
		frames, err := readAll(c, 64)
		if err == nil {
			t.Fatal("no error at the end of the stream")
		}
		for _, fr := range frames {
			if len(fr) == 0 || len(fr) > 64 {
				t.Fatalf("frame of %d bytes", len(fr))
			}
		}
		for out := c.out.Bytes(); len(out) > 0; {
			if len(out) < 12 {
				t.Fatalf("wrote a partial control frame %x", out)
			}
			n := int(out[4])<<24 | int(out[5])<<16 | int(out[6])<<8 | int(out[7])
			typ, _, perr := ParseControl(out[8 : 8+n])
			if perr != nil || (typ != ControlAccept && typ != ControlFinish) {
				t.Fatalf("wrote control %d (%v)", typ, perr)
			}
			out = out[8+n:]
		}
	})
}

// TestWriterAgainstReader runs a Writer and a Reader over a real pipe:
// the handshake, frames and STOP/FINISH in both directions.
func TestWriterAgainstReader(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	var got []string
	go func() {
		r := NewReader(b, ct, 100, 0)
		if err := r.Handshake(); err != nil {
			done <- err
			return
		}
		for {
			f, err := r.Next()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				done <- err
				return
			}
			got = append(got, string(f))
		}
	}()
	w := NewWriter(a, ct)
	if err := w.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(AppendData(AppendData(nil, []byte("one")), []byte("two"))); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Errorf("frames %q", got)
	}
}

// TestWriterRefused: a reader that accepts another content type is an
// error of the writer's handshake.
func TestWriterRefused(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		NewReader(b, "other", 100, 0).Handshake()
		b.Close()
	}()
	if err := NewWriter(a, ct).Handshake(); err == nil {
		t.Fatal("handshake with a reader of another content type succeeded")
	}
}
