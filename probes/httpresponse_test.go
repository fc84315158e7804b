package probes

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"lbdns/configs"
)

// parseAll feeds raw to a respCollector in pieces of step bytes, then
// its end, as the engine reads it; it returns the status code, the body
// (read up to maxBody), whether the head was read and the error.
func parseAll(raw string, head bool, maxBody, step int) (int, string, bool, error) {
	method := "GET"
	if head {
		method = "HEAD"
	}
	c, err := buildHTTPChecker(httpCheck("http", func(h *configs.HTTPCheck) {
		h.Method, h.MaxBody, h.BodyRegexp = method, maxBody, "(?s)"
	}), netip.MustParseAddrPort("192.0.2.1:80"), nil)
	if err != nil {
		panic(err)
	}
	var r respCollector
	r.reset(c)
	var s respScratch
	var buf []byte
	for i := 0; ; i += step {
		end := min(i+step, len(raw))
		buf = append(buf, raw[min(i, len(raw)):end]...)
		eof := end == len(raw)
		done, code, body, err := r.feed(buf, eof, &s)
		if err != nil {
			return 0, "", r.headDone, err
		}
		if done {
			return code, string(body), r.headDone, nil
		}
		if eof {
			return 0, "", r.headDone, errors.New("not done at the end")
		}
	}
}

// readStd reads raw as net/http would for a check: ReadResponse, skipping
// informational responses (closing their bodies), then the body through
// io.LimitReader.
func readStd(raw string, head bool, maxBody int) (int, string, error) {
	br := bufio.NewReader(strings.NewReader(raw))
	method := "GET"
	if head {
		method = "HEAD"
	}
	req, _ := http.NewRequest(method, "http://192.0.2.1/", nil)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return 0, "", err
		}
		if resp.StatusCode < 200 && resp.StatusCode != 101 {
			resp.Body.Close() // as the http checks do (a code below 100 may have a body)
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBody)))
		return resp.StatusCode, string(body), err
	}
}

// TestRespParser: the engine reads what net/http reads, however the
// bytes arrive, and fails where it fails, with its words.
func TestRespParser(t *testing.T) {
	for _, tt := range []struct {
		name    string
		raw     string
		head    bool
		maxBody int
		code    int
		body    string
		err     string // "": no error
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 100, 200, "hello", ""},
		{"length past max_body", "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", false, 5, 200, "hello", ""},
		{"length short", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", false, 100, 200, "", "unexpected EOF"},
		{"to the end", "HTTP/1.0 503 Service Unavailable\r\nServer: x\r\n\r\nbusy\n", false, 100, 503, "busy\n", ""},
		{"to the end past max_body", "HTTP/1.0 200 OK\r\n\r\n0123456789", false, 4, 200, "0123", ""},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, 100, 200, "ok", ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n \r\nB\r\nhealthy now\r\n0\r\n\r\n", false, 100, 200, "hello healthy now", ""},
		{"chunked past max_body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", false, 7, 200, "hello w", ""},
		{"chunked cut", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", false, 100, 200, "", "unexpected EOF"},
		{"chunked bad size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", false, 100, 200, "", "any"},
		{"chunked in 1.0 is not", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, 100, 200, "2\r\nok\r\n0\r\n\r\n", ""},
		{"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 100, 200, "", ""},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", false, 100, 204, "", ""},
		{"continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, 100, 200, "ok", ""},
		{"nothing", "", false, 100, 0, "", "unexpected EOF"},
		{"head cut", "HTTP/1.1 200 OK\r\nContent-Le", false, 100, 0, "", `malformed MIME header: missing colon: "Content-Le"`},
		{"not http", "SSH-2.0-OpenSSH_9.2\r\n\r\n", false, 100, 0, "", `malformed HTTP response "SSH-2.0-OpenSSH_9.2"`},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", false, 100, 0, "", `malformed HTTP status code "2x0"`},
		{"bad version", "HTTP/x 200 OK\r\n\r\n", false, 100, 0, "", `malformed HTTP version "HTTP/x"`},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, 100, 200, "", `bad Content-Length "-1"`},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", false, 100, 200, "", `malformed MIME header: missing colon: "broken"`},
		{"unknown encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, 100, 200, "", `unsupported transfer encoding: "gzip"`},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nokk", false, 100, 0, "", `http: message cannot contain multiple Content-Length headers; got ["2" "3"]`},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false, 100, 200, "ok", ""},
		{"folded header", "HTTP/1.1 200 OK\r\nX-Long: one\r\n two\r\nContent-Length: 2\r\n\r\nok", false, 100, 200, "ok", ""},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n", false, 100, 200, "ok", ""},
		{"chunked without its trailer end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n", false, 100, 0, "", "http: unexpected EOF reading trailer"},
		{"head too long", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", 70<<10) + "\r\n\r\nok", false, 100, 200, "", "server response headers exceeded 65536 bytes"},
	} {
		for _, step := range []int{1, 3, 64, 1 << 20} {
			code, body, _, err := parseAll(tt.raw, tt.head, tt.maxBody, step)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("%s (steps of %d): error %v", tt.name, step, err)
			case tt.err != "" && err == nil:
				t.Errorf("%s (steps of %d): code %d body %q, want error %q", tt.name, step, code, body, tt.err)
			case tt.err != "" && tt.err != "any" && err.Error() != tt.err:
				t.Errorf("%s (steps of %d): error %q, want %q", tt.name, step, err, tt.err)
			case tt.err == "" && (code != tt.code || body != tt.body):
				t.Errorf("%s (steps of %d): code %d body %q, want %d %q", tt.name, step, code, body, tt.code, tt.body)
			}
		}
		// What net/http makes of the same bytes (it reads a head past
		// the limit, which the checks do not).
		if !strings.HasPrefix(tt.name, "head too long") {
			code, body, err := readStd(tt.raw, tt.head, tt.maxBody)
			switch {
			case tt.err == "" && (err != nil || code != tt.code || body != tt.body):
				t.Errorf("%s: net/http reads code %d body %q err %v, want %d %q", tt.name, code, body, err, tt.code, tt.body)
			case tt.err != "" && (err == nil || tt.err != "any" && err.Error() != tt.err):
				t.Errorf("%s: net/http reads code %d body %q err %v, want error %q", tt.name, code, body, err, tt.err)
			}
		}
	}
}

// FuzzRespParser: the engine reads what net/http's ReadResponse reads
// from the same bytes (status, body up to max_body, or the same error),
// however they arrive, and never more body than max_body.
func FuzzRespParser(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 3, 7)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), 1, 2)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nokk"), 5, 10)
	f.Add([]byte("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\nok"), 2, 10)
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No Content\r\n\r\n"), 4, 10)
	f.Fuzz(func(t *testing.T, raw []byte, step, maxBody int) {
		if len(raw) > maxResponseHeader {
			return // past the head limit, which readStd does not apply
		}
		step = max(1, step%64+1)
		maxBody = max(1, maxBody%256+1)
		for _, head := range []bool{false, true} {
			code, body, _, err := parseAll(string(raw), head, maxBody, step)
			wcode, wbody, werr := readStd(string(raw), head, maxBody)
			// Past max_body net/http's chunked reader looks at the next
			// bytes only when they are buffered already: how the bytes
			// arrive decides whether it sees a malformed chunk after the
			// last byte it returns. Both are net/http's verdicts.
			lookahead := err == nil && werr != nil && body == wbody && len(body) == maxBody
			switch {
			case lookahead:
			case (err == nil) != (werr == nil):
				t.Fatalf("head %v, steps of %d: engine %d %q %v; net/http %d %q %v", head, step, code, body, err, wcode, wbody, werr)
			case err != nil && err.Error() != werr.Error():
				t.Fatalf("head %v, steps of %d: engine error %q, net/http %q", head, step, err, werr)
			case err == nil && (code != wcode || body != wbody):
				t.Fatalf("head %v, steps of %d: engine %d %q, net/http %d %q", head, step, code, body, wcode, wbody)
			case len(body) > maxBody:
				t.Fatalf("body %q past max_body %d", body, maxBody)
			}
		}
	})
}

// TestRespCollectorTrickle: a response arriving a byte at a time costs the
// engine's tries a bounded number of bytes parsed, not one parse of the
// whole buffer per byte: a body of known length is tried once it is all
// there, a chunked one within the budget and then at each doubling.
func TestRespCollectorTrickle(t *testing.T) {
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1\r\nx\r\n", 20000) + "0\r\n\r\n"
	length := "HTTP/1.1 200 OK\r\nContent-Length: 60000\r\n\r\n" + strings.Repeat("y", 60000)
	for _, tt := range []struct {
		name, raw string
		body      int
		most      int // bytes all tries may parse
	}{
		{"chunked", chunked, 20000, tryBudget*rawLimit(configs.DefaultHTTPMaxBody) + 3*len(chunked)},
		{"length", length, 60000, 2 * len(length)},
	} {
		c, err := buildHTTPChecker(httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "(?s)" }),
			netip.MustParseAddrPort("192.0.2.1:80"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var r respCollector
		r.reset(c)
		var s respScratch
		var body []byte
		raw := []byte(tt.raw)
		for i := 1; i <= len(raw); i++ {
			done, code, b, err := r.feed(raw[:i], false, &s)
			if err != nil || (done && code != 200) {
				t.Fatalf("%s: code %d, err %v after %d bytes", tt.name, code, err, i)
			}
			if done {
				body = b
				break
			}
		}
		if len(body) != tt.body {
			t.Errorf("%s: body of %d bytes, want %d", tt.name, len(body), tt.body)
		}
		if r.parsed > tt.most {
			t.Errorf("%s: tries parsed %d bytes of a %d-byte response arriving a byte at a time, want at most %d", tt.name, r.parsed, len(tt.raw), tt.most)
		}
	}
}
