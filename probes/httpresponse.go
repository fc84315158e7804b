package probes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxChunkLine is the longest chunk-size line (with extensions) a chunked
// body may have.
const maxChunkLine = 4096

// How a response's body ends (respParser.mode).
const (
	bodyNone    = iota // HEAD, 1xx, 204, 304: no body
	bodyLength         // Content-Length bytes
	bodyChunked        // Transfer-Encoding: chunked
	bodyEOF            // the end of the connection
)

// Chunk decoding states (respParser.chunkLeft when not positive).
const (
	chunkSize = 0  // a chunk-size line comes next
	chunkCRLF = -1 // the CRLF after a chunk's data comes next
)

// errChunked is the error of a chunked body that is not.
var errChunked = errors.New("malformed chunked encoding")

// respParser reads one HTTP/1.x response from a buffer that grows as
// bytes arrive, the way http.ReadResponse and a body read through
// io.LimitReader(body, maxBody) would read it: informational responses
// skipped, the head bounded by maxResponseHeader, the body (decoded when
// chunked) read up to maxBody. A chunked body is decoded in place, so
// the buffer holds the head, the body and at most a partial chunk-size
// line. It allocates nothing but its errors.
type respParser struct {
	head    bool // the request was HEAD: no body
	maxBody int

	off      int  // start of the current response's head in the buffer
	headDone bool // the final response's head is parsed
	code     int
	mode     int
	body     int // start of the body in the buffer
	want     int // bodyLength: body bytes to read, at most maxBody
	// bodyChunked: the decoded body is buf[body:wr], the raw bytes not yet
	// decoded buf[wr:]; chunkLeft is the data left in the current chunk,
	// or chunkSize or chunkCRLF.
	wr        int
	chunkLeft int
}

// reset readies p for a response to a request (HEAD or not).
func (p *respParser) reset(head bool, maxBody int) {
	*p = respParser{head: head, maxBody: maxBody}
}

// feed parses buf, the bytes read so far (eof: and the connection ended
// after them). It returns the buffer's new length (decoding a chunked
// body shrinks it), whether the response is complete, and why it is
// malformed. An error while the head is incomplete is about the head,
// after it about the body (headDone tells which).
func (p *respParser) feed(buf []byte, eof bool) (int, bool, error) {
	for !p.headDone {
		end, err := p.parseHead(buf)
		if err != nil {
			return len(buf), false, err
		}
		if end < 0 {
			if len(buf) >= maxResponseHeader {
				return len(buf), false, fmt.Errorf("server response headers exceeded %d bytes", maxResponseHeader)
			}
			if eof {
				if len(buf) == p.off {
					return len(buf), false, io.EOF
				}
				return len(buf), false, io.ErrUnexpectedEOF
			}
			return len(buf), false, nil
		}
		if end > maxResponseHeader {
			return len(buf), false, fmt.Errorf("server response headers exceeded %d bytes", maxResponseHeader)
		}
		// Informational responses (100 Continue, 103 Early Hints) come
		// before the final one; 101 Switching Protocols is final.
		if p.code >= 200 || p.code == 101 {
			p.headDone, p.body, p.wr = true, end, end
			break
		}
		p.off = end
	}
	got := len(buf) - p.body
	switch p.mode {
	case bodyNone:
		return len(buf), true, nil
	case bodyLength:
		if got >= p.want {
			return len(buf), true, nil
		}
	case bodyEOF:
		if got >= p.maxBody || eof {
			return len(buf), true, nil
		}
		return len(buf), false, nil
	case bodyChunked:
		n, done, err := p.dechunk(buf)
		if done || err != nil {
			return n, done, err
		}
		buf = buf[:n]
	}
	if eof {
		return len(buf), false, io.ErrUnexpectedEOF
	}
	return len(buf), false, nil
}

// bodyBytes returns the body read: at most maxBody bytes.
func (p *respParser) bodyBytes(buf []byte) []byte {
	end := len(buf)
	switch p.mode {
	case bodyNone:
		end = p.body
	case bodyChunked:
		end = p.wr
	}
	return buf[p.body:min(end, p.body+p.maxBody)]
}

// parseHead parses the response head starting at p.off: its status line
// and the headers that say how the body ends. It returns the offset past
// the head's blank line, or -1 while the head is incomplete.
func (p *respParser) parseHead(buf []byte) (int, error) {
	pos := p.off
	first := true
	var (
		length  = -1
		chunked bool
		proto11 bool
	)
	for {
		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl < 0 {
			return -1, nil
		}
		line := buf[pos : pos+nl]
		pos += nl + 1
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if first {
			first = false
			code, p11, err := parseStatusLine(line)
			if err != nil {
				return 0, err
			}
			p.code, proto11 = code, p11
			continue
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("malformed MIME header line: %s", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseUint(value, 10)
			if !ok {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")) && proto11:
			if !bytes.EqualFold(value, []byte("chunked")) {
				return 0, fmt.Errorf("unsupported transfer encoding: %q", value)
			}
			chunked = true
		}
	}
	switch {
	case p.head || p.code < 200 || p.code == 204 || p.code == 304:
		p.mode = bodyNone
	case chunked:
		p.mode = bodyChunked
	case length >= 0:
		p.mode, p.want = bodyLength, min(length, p.maxBody)
	default:
		p.mode = bodyEOF
	}
	return pos, nil
}

// parseStatusLine parses "HTTP/1.1 200 OK" as http.ReadResponse does,
// with its errors; p11 reports HTTP/1.1 or later.
func parseStatusLine(line []byte) (code int, p11 bool, err error) {
	proto, status, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return 0, false, fmt.Errorf("malformed HTTP response %q", line)
	}
	status = bytes.TrimLeft(status, " ")
	codeText, _, _ := bytes.Cut(status, []byte(" "))
	if len(codeText) != 3 {
		return 0, false, fmt.Errorf("malformed HTTP status code %q", codeText)
	}
	for _, c := range codeText {
		if c < '0' || c > '9' {
			return 0, false, fmt.Errorf("malformed HTTP status code %q", codeText)
		}
		code = code*10 + int(c-'0')
	}
	if len(proto) != 8 || !bytes.HasPrefix(proto, []byte("HTTP/")) || proto[6] != '.' ||
		proto[5] < '0' || proto[5] > '9' || proto[7] < '0' || proto[7] > '9' {
		return 0, false, fmt.Errorf("malformed HTTP version %q", proto)
	}
	return code, proto[5] > '1' || (proto[5] == '1' && proto[7] >= '1'), nil
}

// dechunk decodes the chunks in buf[p.wr:] in place, the data moved down
// to the end of the body decoded so far. It returns the buffer's new
// length and whether the body is complete: its last chunk read, or
// maxBody bytes of it.
func (p *respParser) dechunk(buf []byte) (int, bool, error) {
	rd, wr := p.wr, p.wr
	done := false
	var err error
	for !done && err == nil {
		if wr-p.body >= p.maxBody {
			done = true
			break
		}
		switch {
		case p.chunkLeft > 0:
			k := min(p.chunkLeft, len(buf)-rd)
			if k == 0 {
				goto out
			}
			copy(buf[wr:], buf[rd:rd+k])
			wr, rd, p.chunkLeft = wr+k, rd+k, p.chunkLeft-k
			if p.chunkLeft == 0 {
				p.chunkLeft = chunkCRLF
			}
		case p.chunkLeft == chunkCRLF:
			if len(buf)-rd < 2 {
				goto out
			}
			if buf[rd] != '\r' || buf[rd+1] != '\n' {
				err = errChunked
				break
			}
			rd += 2
			p.chunkLeft = chunkSize
		default:
			nl := bytes.IndexByte(buf[rd:], '\n')
			if nl < 0 {
				if len(buf)-rd > maxChunkLine {
					err = errChunked
				}
				goto out
			}
			line := bytes.TrimRight(buf[rd:rd+nl], "\r")
			line, _, _ = bytes.Cut(line, []byte(";"))
			line = bytes.TrimSpace(line)
			n, ok := parseUint(line, 16)
			if !ok {
				err = errChunked
				break
			}
			rd += nl + 1
			if n == 0 {
				done = true // trailers are not read: the check ends here
				break
			}
			p.chunkLeft = n
		}
	}
out:
	tail := copy(buf[wr:], buf[rd:])
	p.wr = wr
	return wr + tail, done, err
}

// parseUint parses b, digits in base 10 or 16, without allocating; ok is
// false when b is empty, has another byte or is past 2^48.
func parseUint(b []byte, base int) (int, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case base == 16 && c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return 0, false
		}
		n = n*base + d
	}
	return n, true
}
