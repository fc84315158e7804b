package probes

import (
	"net/netip"
	"strings"
	"testing"

	"lbdns/configs"
)

// judgeResponses are responses as the plain-HTTP engine collects them,
// each arriving in one read: what net/http's own server sends for a small
// body, a chunked body, and the longer head of a web server behind a
// load balancer.
var judgeResponses = []struct{ name, raw string }{
	{"small", "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 11:00:00 GMT\r\nContent-Length: 2\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nok"},
	{"chunked", "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 11:00:00 GMT\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n7\r\nhealthy\r\n0\r\n\r\n"},
	{"nginx", "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 11:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 615\r\nLast-Modified: Mon, 30 Nov 2026 10:00:00 GMT\r\nConnection: close\r\nETag: \"6566-267\"\r\nAccept-Ranges: bytes\r\nCache-Control: no-cache\r\nX-Frame-Options: SAMEORIGIN\r\n\r\n" + strings.Repeat("x", 615)},
}

// BenchmarkHTTPJudge measures what the plain-HTTP engine does with a
// response once its bytes are read: parse it, read the body up to
// max_body, and judge status and body (body_regexp "ok|healthy|x").
func BenchmarkHTTPJudge(b *testing.B) {
	for _, r := range judgeResponses {
		b.Run(r.name, func(b *testing.B) {
			c, err := buildHTTPChecker(httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "ok|healthy|x" }), netip.MustParseAddrPort("127.0.0.1:80"), nil)
			if err != nil {
				b.Fatal(err)
			}
			j := newBenchJudge(c)
			raw := []byte(r.raw)
			buf := make([]byte, 0, httpBufSize)
			b.ReportAllocs()
			for b.Loop() {
				buf = append(buf[:0], raw...)
				if detail, ok := j.judge(buf); !ok {
					b.Fatal(detail)
				}
			}
		})
	}
}
