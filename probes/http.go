package probes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// maxRedirects is how many redirects a check with follow_redirects
// follows before it fails.
const maxRedirects = 10

// httpChecker checks one target with one HTTP or HTTPS request: status
// code, then (when asked) a regexp over the start of the body, and for
// HTTPS the server's certificate and its days to expiry.
//
// Keep-alives are off (probeTransport): each probe dials, handshakes and
// sends anew, so it proves that the server still accepts connections and
// still presents a valid certificate (a pooled connection would hide a
// listener that no longer accepts, and a certificate replaced since), and
// thousands of members hold no idle sockets between probes.
type httpChecker struct {
	url     string
	req     *http.Request // the request, without its context; nil: reqErr
	reqErr  error         // why the request could not be made
	method  string
	host    string
	header  http.Header
	status  []configs.StatusRange
	body    *regexp.Regexp
	maxBody int64
	client  *http.Client
	addr    netip.AddrPort // the address connected to
	wire    []byte         // the request as sent, when the transport rendered it
	follow  bool
	isTLS   bool
	warn    time.Duration
	timeout time.Duration
	now     func() time.Time
	// okDetail is the last passing check's detail, made once per code.
	okDetail atomic.Pointer[statusDetail]
}

// newHTTPChecker builds the checker of kind "http" or "https".
// A plain-HTTP check that follows no redirects runs in the Builder's
// connectEngine (StartCheck, and Check through it).
func newHTTPChecker(chk *configs.Check, target netip.AddrPort, deps Deps) (check.Checker, error) {
	c, err := buildHTTPChecker(chk, target, time.Now)
	if err != nil {
		return nil, err
	}
	if !c.isTLS && !c.follow && c.wire != nil && deps.tcp.async(c.addr) {
		return &httpEngineChecker{httpChecker: c, engine: deps.tcp}, nil
	}
	return c, nil
}

// httpEngineChecker is a plain-HTTP checker whose checks run in its
// Builder's connectEngine: no goroutine, context or timer per check.
type httpEngineChecker struct {
	*httpChecker
	engine *connectEngine
}

// StartCheck starts one check through the engine (monitor.AsyncChecker);
// done gets the result by deadline (plus the engine's tick).
func (c *httpEngineChecker) StartCheck(deadline time.Time, done func(check.Result)) {
	c.engine.startHTTP(c.addr, c.httpChecker, deadline, done)
}

// Check checks once through the engine within ctx's deadline, or the
// check's timeout when ctx has none (check.Checker).
func (c *httpEngineChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()
	ch := make(chan Result, 1)
	c.StartCheck(deadline, func(r check.Result) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return Result{RTT: time.Since(start), Detail: "canceled"}
		}
		return <-ch // the engine times it out at deadline
	}
}

// buildHTTPChecker parses chk once (URL, headers, status ranges, regexp,
// CA pool and client certificate); now is the clock certificates are
// judged by.
func buildHTTPChecker(chk *configs.Check, target netip.AddrPort, now func() time.Time) (*httpChecker, error) {
	isTLS := chk.Kind == "https"
	s := chk.HTTP
	scheme, port := "http", uint16(80)
	if isTLS {
		s, scheme, port = chk.HTTPS, "https", 443
	}
	if s == nil {
		return nil, fmt.Errorf("no [check.%s.%s] settings", chk.Name, chk.Kind)
	}
	if !target.IsValid() {
		return nil, fmt.Errorf("invalid target %s", target)
	}
	if target.Port() != 0 {
		port = target.Port()
	}
	addr := netip.AddrPortFrom(target.Addr(), port)
	u, err := url.Parse(scheme + "://" + addr.String() + s.Path)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", s.Path, err)
	}
	c := &httpChecker{
		url:     u.String(),
		addr:    addr,
		follow:  s.FollowRedirects,
		method:  s.Method,
		host:    s.Host,
		header:  http.Header{},
		maxBody: int64(s.MaxBody),
		isTLS:   isTLS,
		warn:    s.CertExpiryWarn.Duration,
		timeout: chk.Timeout.Duration,
		now:     now,
	}
	if c.method == "" {
		c.method = configs.DefaultHTTPMethod
	}
	if c.maxBody <= 0 {
		c.maxBody = configs.DefaultHTTPMaxBody
	}
	if c.timeout <= 0 {
		c.timeout = configs.DefaultTimeout
	}
	for k, v := range s.Headers {
		c.header.Set(k, v)
	}
	if c.header.Get("User-Agent") == "" {
		c.header.Set("User-Agent", "lbdns-health-check")
	}
	status := s.Status
	if len(status) == 0 {
		status = []string{configs.DefaultHTTPStatus}
	}
	for _, st := range status {
		r, err := configs.ParseStatus(st)
		if err != nil {
			return nil, fmt.Errorf("status %q: %w", st, err)
		}
		c.status = append(c.status, r)
	}
	if s.BodyRegexp != "" {
		if c.body, err = regexp.Compile(s.BodyRegexp); err != nil {
			return nil, fmt.Errorf("body_regexp: %w", err)
		}
	}
	tr := &probeTransport{}
	if isTLS {
		if tr.tls, err = httpsTLS(s, now); err != nil {
			return nil, err
		}
	}
	// The request is made once; each check sends a copy with its context.
	c.req, c.reqErr = http.NewRequest(c.method, c.url, nil)
	if c.req != nil {
		if c.host != "" {
			c.req.Host = c.host
		}
		c.req.Header = c.header
		tr.prepare(c.req)
		c.wire = tr.head
	}
	follow := s.FollowRedirects
	c.client = &http.Client{Transport: tr, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if !follow {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}}
	return c, nil
}

// httpsTLS builds the client TLS settings of an https check: the server
// name from server_name, else from the Host header when it is a name.
func httpsTLS(s *configs.HTTPCheck, now func() time.Time) (*tls.Config, error) {
	name := s.ServerName
	if name == "" && s.Host != "" {
		h := s.Host
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err != nil {
			name = h
		}
	}
	return clientTLS(tlsSettings{serverName: name, caFile: s.CAFile, certFile: s.CertFile, keyFile: s.KeyFile,
		insecure: s.InsecureSkipVerify, now: now})
}

// ProbeAddr returns the address connected to (check.Addressed).
func (c *httpChecker) ProbeAddr() netip.AddrPort { return c.addr }

// Check sends the request once and judges the response (check.Checker).
// The whole exchange (connect, TLS, headers, body) shares ctx's deadline,
// or the check's timeout when ctx has none; RTT is its duration.
func (c *httpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()
	budget := deadline.Sub(start)

	if c.reqErr != nil {
		return Result{RTT: time.Since(start), Detail: "bad check: " + c.reqErr.Error()}
	}
	req := c.req.WithContext(ctx) // headers shared: nothing changes them
	// The first handshake's certificate, for the days left when the
	// exchange fails after it (a server that handshakes, then stalls).
	var shook atomic.Pointer[x509.Certificate]
	if c.isTLS {
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
				if err == nil && len(cs.PeerCertificates) > 0 {
					shook.CompareAndSwap(nil, cs.PeerCertificates[0])
				}
			},
		}))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		detail, days := c.describeHTTPErr(ctx, err, budget)
		if cert := shook.Load(); days == nil && cert != nil {
			days = daysLeft(cert.NotAfter.Sub(c.now()))
		}
		return Result{RTT: time.Since(start), Detail: detail, Facts: certFacts(days), Cause: localCause(err, c.addr)}
	}
	defer resp.Body.Close()
	var days *int
	var left time.Duration
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		left = resp.TLS.PeerCertificates[0].NotAfter.Sub(c.now())
		days = daysLeft(left)
	}
	// The body is read up to max_body in any case: a server that stalls
	// in it fails the check. Without body_regexp it is not kept.
	body, err := c.readBody(nil, resp.Body)
	if err != nil {
		detail, _ := c.describeHTTPErr(ctx, err, budget)
		return Result{RTT: time.Since(start), Detail: "read body: " + detail, Facts: certFacts(days)}
	}
	res := Result{RTT: time.Since(start), Facts: certFacts(days)}
	res.Detail, res.OK = c.verdict(resp.StatusCode, body)
	if !res.OK {
		return res
	}
	switch {
	case days == nil:
	case left <= 0:
		// Reached only with insecure_skip_verify.
		res.Detail += "; " + expiredText(-left) + " (not verified: insecure_skip_verify)"
	case left < c.warn:
		res.Detail += fmt.Sprintf("; certificate expires in %d days (warning at %d)", *days, int(c.warn/(24*time.Hour)))
	}
	return res
}

// verdict judges a response by its status code and the start of its body
// (read up to max_body).
func (c *httpChecker) verdict(code int, body []byte) (string, bool) {
	if !c.accepts(code) {
		return fmt.Sprintf("status %d not accepted (want %s)", code, c.statusText()), false
	}
	if c.body != nil && !c.body.Match(body) {
		detail := fmt.Sprintf("body does not match /%s/", c.body)
		if int64(len(body)) == c.maxBody {
			detail += fmt.Sprintf(" in its first %d bytes", c.maxBody)
		}
		return detail, false
	}
	if last := c.okDetail.Load(); last != nil && last.code == code {
		return last.detail, true
	}
	d := &statusDetail{code, "status " + strconv.Itoa(code)}
	c.okDetail.Store(d)
	return d.detail, true
}

// statusDetail is the detail of a check that passed with code.
type statusDetail struct {
	code   int
	detail string
}

// accepts reports whether code is in one of the accepted ranges.
func (c *httpChecker) accepts(code int) bool {
	for _, r := range c.status {
		if r.Contains(code) {
			return true
		}
	}
	return false
}

// statusText lists the accepted ranges as written ("200-299, 301").
func (c *httpChecker) statusText() string {
	parts := make([]string, len(c.status))
	for i, r := range c.status {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// describeHTTPErr turns a request error into a Detail, naming the
// certificate problem when verification failed, and the certificate's
// days left when the error carries it.
func (c *httpChecker) describeHTTPErr(ctx context.Context, err error, budget time.Duration) (string, *int) {
	var (
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		unknown  x509.UnknownAuthorityError
	)
	switch {
	case errors.As(err, &invalid) && invalid.Cert != nil:
		left := invalid.Cert.NotAfter.Sub(c.now())
		switch invalid.Reason {
		case x509.Expired:
			if left <= 0 {
				return expiredText(-left), daysLeft(left)
			}
			return "certificate not valid before " + invalid.Cert.NotBefore.UTC().Format(time.RFC3339), daysLeft(left)
		}
		return invalid.Error(), daysLeft(left)
	case errors.As(err, &hostname) && hostname.Certificate != nil:
		return strings.TrimPrefix(hostname.Error(), "x509: "), daysLeft(hostname.Certificate.NotAfter.Sub(c.now()))
	case errors.As(err, &unknown):
		var days *int
		if unknown.Cert != nil {
			days = daysLeft(unknown.Cert.NotAfter.Sub(c.now()))
		}
		return "x509: certificate signed by unknown authority", days
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return describeErr(ctx, err, budget), nil
}

// daysLeft returns the whole days in left, truncated, and at most -1 once
// left is not positive: negative means expired.
// CertDaysLeftFact names the https kind's fact: the whole days until the
// server's certificate expires (negative: expired).
const CertDaysLeftFact = "cert_days_left"

// httpFactMetrics returns the metrics of the https kind's facts.
func httpFactMetrics() []check.FactMetric {
	return []check.FactMetric{{Fact: CertDaysLeftFact, Metric: "gslb_certificate_days_left",
		Help: "Days until the certificate the HTTPS monitor was served expires (negative: expired).", Scale: 1}}
}

// certFacts returns the facts of an https probe that saw a certificate
// with days left (nil: none seen, as for plain http).
func certFacts(days *int) []check.Fact {
	if days == nil {
		return nil
	}
	return []check.Fact{{Name: CertDaysLeftFact, Value: float64(*days)}}
}

func daysLeft(left time.Duration) *int {
	d := int(left / (24 * time.Hour))
	if left <= 0 && d == 0 {
		d = -1
	}
	return &d
}

// expiredText says how long ago a certificate expired.
func expiredText(ago time.Duration) string {
	switch n := int(ago / (24 * time.Hour)); n {
	case 0:
		return "certificate expired less than a day ago"
	case 1:
		return "certificate expired 1 day ago"
	default:
		return fmt.Sprintf("certificate expired %d days ago", n)
	}
}
