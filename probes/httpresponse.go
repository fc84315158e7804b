package probes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// The plain-HTTP engine reads a response into one buffer as its bytes
// arrive and judges it with net/http's own parser (http.ReadResponse and
// the body reader it returns), the parser the https checks and
// follow_redirects read the connection with: every kind judges the same
// bytes alike. Each try parses the whole buffer again, so a try is made
// only when it can end the response (respCollector.worth).

// errMore is the error of collected at the end of the bytes read so far
// while the connection is still open: the response may go on.
var errMore = errors.New("probes: response incomplete")

// errTooLong is the error of a response that does not end within the
// bytes the engine reads (rawLimit).
var errTooLong = errors.New("response too long")

// rawLimit is the most bytes of one response the engine reads: the head
// limit, max_body twice over (a chunked body's framing is read with its
// data) and net/http's own allowance of 16 KiB of chunk framing.
func rawLimit(maxBody int64) int {
	return maxResponseHeader + 2*int(maxBody) + 16<<10
}

// tryBudget bounds the bytes all the tries of one response parse, in
// rawLimits: past it, a head or a chunked body arriving in many small
// reads is tried again only when the buffer has doubled since the last
// try or ends with a blank line (as a head and a chunked body's trailer
// end), or at the end, so that a server trickling bytes costs the engine
// about linear time.
const tryBudget = 4

// collected reads the bytes a check has read so far.
type collected struct {
	buf     []byte
	off     int
	eof     bool // the connection ended after buf
	starved bool // a read asked for bytes past buf before the end
}

// Read reads from the buffer; past its end it returns io.EOF when the
// connection ended, else errMore (io.Reader).
func (c *collected) Read(p []byte) (int, error) {
	if c.off < len(c.buf) {
		n := copy(p, c.buf[c.off:])
		c.off += n
		return n, nil
	}
	if c.eof {
		return 0, io.EOF
	}
	c.starved = true
	return 0, errMore
}

// readFinalResponse reads the final response's head from br, which reads
// through lr (the head limit): informational responses (100 Continue,
// 103 Early Hints) are skipped; 101 Switching Protocols is final. It then
// lifts the limit for the body. It is the one reading of a head that
// every http check does.
func readFinalResponse(br *bufio.Reader, lr *headLimit, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			if lr.n <= 0 {
				err = fmt.Errorf("server response headers exceeded %d bytes", maxResponseHeader)
			}
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			lr.n = -1 // no limit on the body: the checker bounds what it reads
			return resp, nil
		}
		resp.Body.Close()
	}
}

// readBody reads body up to max_body bytes, as every http check does:
// appended to dst when body_regexp needs them, else discarded (nil).
func (c *httpChecker) readBody(dst []byte, body io.Reader) ([]byte, error) {
	lr := io.LimitedReader{R: body, N: c.maxBody}
	if c.body == nil {
		_, err := io.Copy(io.Discard, &lr)
		return nil, err
	}
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, max(512, len(dst)))
		}
		n, err := lr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// respScratch is what the tries of one engine goroutine share: a bufio
// reader and the body's buffer. Only that goroutine uses them.
type respScratch struct {
	br   *bufio.Reader
	body []byte
}

// respCollector judges one plain-HTTP check's response from the bytes
// read so far: it keeps only what tells whether a try can end it.
type respCollector struct {
	c   *httpChecker
	src collected
	lr  headLimit
	// headDone: the final response's head was read whole, and how its
	// body ends: length (Content-Length, or -1), chunked, or no body.
	headDone  bool
	bodyStart int
	length    int64
	chunked   bool
	noBody    bool
	// parsed counts the bytes all tries parsed, last the buffer's length
	// at the last try.
	parsed, last int
}

// reset readies r for a check of c.
func (r *respCollector) reset(c *httpChecker) { *r = respCollector{c: c} }

// worth reports whether a try on buf can end the response: at the end of
// the connection or of the bytes read, when the body is known to be
// whole, and else while the tries stay within their budget (tryBudget).
func (r *respCollector) worth(buf []byte, eof bool) bool {
	n := len(buf)
	limit := rawLimit(r.c.maxBody)
	if eof || n >= limit {
		return true
	}
	if r.headDone {
		body := int64(n - r.bodyStart)
		switch {
		case r.noBody:
			return true
		case r.length >= 0:
			return body >= min(r.length, r.c.maxBody)
		case !r.chunked:
			return body >= r.c.maxBody // else it ends with the connection
		}
	}
	return r.parsed < tryBudget*limit || n >= 2*r.last ||
		bytes.HasSuffix(buf, []byte("\n\n")) || bytes.HasSuffix(buf, []byte("\n\r\n"))
}

// feed tries buf, the bytes read so far (eof: and the connection ended
// after them). It reports whether the response is read, then with its
// status code and body (read up to max_body, kept only for body_regexp;
// valid until s is used again) or the error that ended it; an error after
// the head is about the body (headDone). The scratch reader and body are
// s's.
func (r *respCollector) feed(buf []byte, eof bool, s *respScratch) (done bool, code int, body []byte, err error) {
	if !r.worth(buf, eof) {
		return false, 0, nil, nil
	}
	r.parsed += len(buf)
	r.last = len(buf)
	r.src = collected{buf: buf, eof: eof}
	r.lr = headLimit{r: &r.src, n: maxResponseHeader}
	if s.br == nil {
		s.br = bufio.NewReader(&r.lr)
	} else {
		s.br.Reset(&r.lr)
	}
	defer s.br.Reset(nil)
	more := func() bool { return r.src.starved && !eof }
	resp, err := readFinalResponse(s.br, &r.lr, r.c.req)
	if err != nil {
		if more() {
			if len(buf) >= rawLimit(r.c.maxBody) {
				return true, 0, nil, errTooLong
			}
			return false, 0, nil, nil
		}
		return true, 0, nil, err
	}
	if !r.src.starved {
		r.headDone, r.bodyStart = true, r.src.off-s.br.Buffered()
		r.length, r.noBody = resp.ContentLength, resp.Body == http.NoBody
		r.chunked = slices.Contains(resp.TransferEncoding, "chunked")
	}
	body, err = r.c.readBody(s.body[:0], resp.Body)
	if body != nil {
		s.body = body[:0]
	}
	switch {
	case more():
		if len(buf) >= rawLimit(r.c.maxBody) {
			return true, 0, nil, errTooLong
		}
		return false, 0, nil, nil
	case err != nil:
		return true, 0, nil, err
	}
	return true, resp.StatusCode, body, nil
}
