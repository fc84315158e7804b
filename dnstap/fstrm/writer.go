package fstrm

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer is the sending side of a bidirectional Frame Streams
// connection, as resolvers run it: READY, wait for ACCEPT, START, data
// frames, STOP, wait for FINISH. lbdns's tests and tools send dnstap with
// it. It is not safe for concurrent use.
type Writer struct {
	rw          io.ReadWriter
	r           *bufio.Reader
	contentType string
}

// NewWriter returns a Writer of contentType over rw.
func NewWriter(rw io.ReadWriter, contentType string) *Writer {
	return &Writer{rw: rw, r: bufio.NewReaderSize(rw, 1024), contentType: contentType}
}

// Handshake sends READY, reads the reader's ACCEPT (which must name the
// content type) and sends START.
func (w *Writer) Handshake() error {
	if _, err := w.rw.Write(AppendControl(nil, ControlReady, w.contentType)); err != nil {
		return fmt.Errorf("fstrm: write READY: %w", err)
	}
	typ, types, err := w.readControl()
	if err != nil {
		return err
	}
	if typ != ControlAccept {
		return fmt.Errorf("%w: %s in answer to READY, want ACCEPT", ErrProtocol, controlName(typ))
	}
	ok := false
	for _, t := range types {
		ok = ok || t == w.contentType
	}
	if !ok {
		return fmt.Errorf("%w: ACCEPT names %q, want %q", ErrContentType, types, w.contentType)
	}
	if _, err := w.rw.Write(AppendControl(nil, ControlStart, w.contentType)); err != nil {
		return fmt.Errorf("fstrm: write START: %w", err)
	}
	return nil
}

// Write sends frames, each already framed by AppendData (several may be
// given in one slice).
func (w *Writer) Write(frames []byte) error {
	if _, err := w.rw.Write(frames); err != nil {
		return fmt.Errorf("fstrm: write: %w", err)
	}
	return nil
}

// Stop sends STOP and waits for FINISH.
func (w *Writer) Stop() error {
	if _, err := w.rw.Write(AppendControl(nil, ControlStop)); err != nil {
		return fmt.Errorf("fstrm: write STOP: %w", err)
	}
	typ, _, err := w.readControl()
	if err != nil {
		return err
	}
	if typ != ControlFinish {
		return fmt.Errorf("%w: %s in answer to STOP, want FINISH", ErrProtocol, controlName(typ))
	}
	return nil
}

// readControl reads one control frame (escape, length, body).
func (w *Writer) readControl() (uint32, []string, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(w.r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("fstrm: read control frame: %w", eofIsUnexpected(err))
	}
	if esc := binary.BigEndian.Uint32(hdr[:]); esc != 0 {
		return 0, nil, fmt.Errorf("%w: data frame of %d bytes from the reader", ErrProtocol, esc)
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n < 4 || n > MaxControlFrame {
		return 0, nil, fmt.Errorf("%w: control frame of %d bytes (want 4..%d)", ErrProtocol, n, MaxControlFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(w.r, b); err != nil {
		return 0, nil, fmt.Errorf("fstrm: read control frame: %w", eofIsUnexpected(err))
	}
	return ParseControl(b)
}
