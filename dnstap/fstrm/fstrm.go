// Package fstrm reads Frame Streams, the framing dnstap travels in
// (https://github.com/farsightsec/fstrm, "Frame Streams Control
// Protocol"), from one connection: the handshake (bidirectional: READY
// from the writer, ACCEPT from us, then START; or unidirectional: START
// alone), data frames up to a size cap, and STOP answered with FINISH.
//
// On the wire a data frame is a 32-bit big-endian length (not zero) and
// that many bytes. A control frame is an escape (a zero length), the
// control frame's length (at most MaxControlFrame), its 32-bit type and
// its fields, each a 32-bit type, a 32-bit length and the value; the only
// field is CONTENT_TYPE.
//
// The package does no I/O of its own beyond the connection it is given
// and keeps no state beyond one Reader per connection: deadlines are the
// caller's (set them on the connection).
package fstrm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Control frame types (the Frame Streams control protocol).
const (
	ControlAccept uint32 = 0x01
	ControlStart  uint32 = 0x02
	ControlStop   uint32 = 0x03
	ControlReady  uint32 = 0x04
	ControlFinish uint32 = 0x05
)

// FieldContentType is the control frame field naming a content type.
const FieldContentType uint32 = 0x01

// MaxControlFrame is the largest control frame accepted, in bytes after
// its length (libfstrm's FSTRM_CONTROL_FRAME_LENGTH_MAX).
const MaxControlFrame = 512

// MaxContentType is the longest content type accepted
// (FSTRM_CONTROL_FIELD_CONTENT_TYPE_LENGTH_MAX).
const MaxContentType = 256

// Errors a Reader returns, wrapped with what it saw; test with errors.Is.
var (
	// ErrProtocol is a stream that breaks the Frame Streams protocol: a
	// control frame of a bad size, an unknown or unexpected control
	// type, a malformed field, data before the handshake.
	ErrProtocol = errors.New("fstrm: protocol violation")
	// ErrContentType is a handshake whose content types do not include
	// the one the Reader accepts.
	ErrContentType = errors.New("fstrm: content type not accepted")
	// ErrFrameTooLarge is a data frame longer than the Reader's cap; its
	// bytes are not read.
	ErrFrameTooLarge = errors.New("fstrm: frame too large")
)

// Reader reads one Frame Streams connection. It is not safe for
// concurrent use.
type Reader struct {
	r           *bufio.Reader
	w           io.Writer
	contentType string
	maxFrame    int
	// bidirectional is set by a handshake that began with READY: STOP
	// is then answered with FINISH.
	bidirectional bool
	started       bool
	buf           []byte
	hdr           [4]byte
	ctl           [MaxControlFrame]byte
}

// NewReader returns a Reader of the stream rw that accepts contentType
// and data frames of at most maxFrame bytes. It reads rw through a
// buffer of bufSize bytes (4096 when smaller than that) and writes ACCEPT
// and FINISH to rw.
func NewReader(rw io.ReadWriter, contentType string, maxFrame, bufSize int) *Reader {
	return &Reader{r: bufio.NewReaderSize(rw, bufSize), w: rw, contentType: contentType, maxFrame: maxFrame}
}

// Bidirectional reports whether the handshake was bidirectional (READY
// and ACCEPT before START).
func (r *Reader) Bidirectional() bool { return r.bidirectional }

// Handshake reads the writer's opening: READY, to which it answers ACCEPT
// with the content type, then START; or START alone. Either must name the
// Reader's content type (START may leave it out after READY, as it was
// agreed). Errors wrap ErrProtocol, ErrContentType or the connection's
// error (a deadline, io.EOF).
func (r *Reader) Handshake() error {
	typ, types, err := r.readControl()
	if err != nil {
		return err
	}
	switch typ {
	case ControlReady:
		if !r.offers(types) {
			return fmt.Errorf("%w: READY offers %q, want %q", ErrContentType, types, r.contentType)
		}
		if err := r.writeControl(ControlAccept, r.contentType); err != nil {
			return fmt.Errorf("fstrm: write ACCEPT: %w", err)
		}
		r.bidirectional = true
		if typ, types, err = r.readControl(); err != nil {
			return err
		}
		if typ != ControlStart {
			return fmt.Errorf("%w: %s after READY, want START", ErrProtocol, controlName(typ))
		}
		if len(types) > 0 && !r.offers(types) {
			return fmt.Errorf("%w: START names %q, want %q", ErrContentType, types, r.contentType)
		}
	case ControlStart:
		if !r.offers(types) {
			return fmt.Errorf("%w: START names %q, want %q", ErrContentType, types, r.contentType)
		}
	default:
		return fmt.Errorf("%w: %s first, want READY or START", ErrProtocol, controlName(typ))
	}
	r.started = true
	return nil
}

// offers reports whether types holds the Reader's content type.
func (r *Reader) offers(types []string) bool {
	for _, t := range types {
		if t == r.contentType {
			return true
		}
	}
	return false
}

// Next returns the next data frame. The slice is valid until the next
// call. After STOP it answers FINISH (when the handshake was
// bidirectional) and returns io.EOF; a connection that ends without STOP
// gives io.ErrUnexpectedEOF. Errors wrap ErrProtocol, ErrFrameTooLarge or
// the connection's error.
func (r *Reader) Next() ([]byte, error) {
	if !r.started {
		return nil, fmt.Errorf("%w: Next before the handshake", ErrProtocol)
	}
	n, err := r.readUint32()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n == 0 {
		typ, _, err := r.readControlBody()
		if err != nil {
			return nil, err
		}
		if typ != ControlStop {
			return nil, fmt.Errorf("%w: %s in the data stream, want STOP", ErrProtocol, controlName(typ))
		}
		r.started = false
		if r.bidirectional {
			if err := r.writeControl(ControlFinish, ""); err != nil {
				return nil, fmt.Errorf("fstrm: write FINISH: %w", err)
			}
		}
		return nil, io.EOF
	}
	if int64(n) > int64(r.maxFrame) {
		return nil, fmt.Errorf("%w: %d bytes, the cap is %d", ErrFrameTooLarge, n, r.maxFrame)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, eofIsUnexpected(err)
	}
	return b, nil
}

// readControl reads one control frame with its escape.
func (r *Reader) readControl() (uint32, []string, error) {
	esc, err := r.readUint32()
	if err != nil {
		return 0, nil, err
	}
	if esc != 0 {
		return 0, nil, fmt.Errorf("%w: data frame of %d bytes before the handshake", ErrProtocol, esc)
	}
	return r.readControlBody()
}

// readControlBody reads a control frame after its escape: its length,
// type and fields. Only CONTENT_TYPE fields are kept; READY and START may
// hold them, the others none.
func (r *Reader) readControlBody() (uint32, []string, error) {
	n, err := r.readUint32()
	if err != nil {
		return 0, nil, eofIsUnexpected(err)
	}
	if n < 4 || n > MaxControlFrame {
		return 0, nil, fmt.Errorf("%w: control frame of %d bytes (want 4..%d)", ErrProtocol, n, MaxControlFrame)
	}
	b := r.ctl[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return 0, nil, eofIsUnexpected(err)
	}
	return ParseControl(b)
}

// ParseControl parses a control frame's body (after its length): its
// type and the content types of its fields. Errors wrap ErrProtocol.
func ParseControl(b []byte) (uint32, []string, error) {
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("%w: control frame of %d bytes", ErrProtocol, len(b))
	}
	typ := binary.BigEndian.Uint32(b)
	if typ < ControlAccept || typ > ControlFinish {
		return 0, nil, fmt.Errorf("%w: unknown control type %#x", ErrProtocol, typ)
	}
	var types []string
	for b = b[4:]; len(b) > 0; {
		if len(b) < 8 {
			return 0, nil, fmt.Errorf("%w: %s: truncated field", ErrProtocol, controlName(typ))
		}
		ft, fl := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
		b = b[8:]
		if ft != FieldContentType {
			return 0, nil, fmt.Errorf("%w: %s: unknown field type %#x", ErrProtocol, controlName(typ), ft)
		}
		if fl > MaxContentType || int(fl) > len(b) {
			return 0, nil, fmt.Errorf("%w: %s: content type of %d bytes", ErrProtocol, controlName(typ), fl)
		}
		types = append(types, string(b[:fl]))
		b = b[fl:]
	}
	if len(types) > 0 && typ != ControlReady && typ != ControlStart && typ != ControlAccept {
		return 0, nil, fmt.Errorf("%w: %s with a content type", ErrProtocol, controlName(typ))
	}
	return typ, types, nil
}

// AppendControl appends a whole control frame (escape, length, type and
// one CONTENT_TYPE field per content type) to b.
func AppendControl(b []byte, typ uint32, contentTypes ...string) []byte {
	n := 4
	for _, ct := range contentTypes {
		n += 8 + len(ct)
	}
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, typ)
	for _, ct := range contentTypes {
		b = binary.BigEndian.AppendUint32(b, FieldContentType)
		b = binary.BigEndian.AppendUint32(b, uint32(len(ct)))
		b = append(b, ct...)
	}
	return b
}

// AppendData appends a data frame (length and payload) to b.
func AppendData(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func (r *Reader) writeControl(typ uint32, contentType string) error {
	var cts []string
	if contentType != "" {
		cts = []string{contentType}
	}
	_, err := r.w.Write(AppendControl(make([]byte, 0, 32+len(contentType)), typ, cts...))
	return err
}

func (r *Reader) readUint32() (uint32, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(r.hdr[:]), nil
}

// eofIsUnexpected turns an end of stream inside a frame into
// io.ErrUnexpectedEOF.
func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// controlName names a control type for messages.
func controlName(typ uint32) string {
	switch typ {
	case ControlAccept:
		return "ACCEPT"
	case ControlStart:
		return "START"
	case ControlStop:
		return "STOP"
	case ControlReady:
		return "READY"
	case ControlFinish:
		return "FINISH"
	}
	return fmt.Sprintf("control type %#x", typ)
}
