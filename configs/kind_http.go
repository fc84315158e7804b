package configs

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the keys of a [check.NAME.http] or [check.NAME.https] table.
const (
	DefaultHTTPMethod = "GET"
	DefaultHTTPPath   = "/"
	DefaultHTTPStatus = "200-299"
	// DefaultHTTPMaxBody is how much of the body a check reads (64 KiB).
	DefaultHTTPMaxBody = 64 << 10
	// MaxHTTPMaxBody is the largest max_body accepted (16 MiB).
	MaxHTTPMaxBody = 16 << 20
	// DefaultCertExpiryWarn is when an https check starts warning that the
	// certificate expires soon (14 days).
	DefaultCertExpiryWarn = 14 * 24 * time.Hour
)

// HTTPCheck is the settings of a check of kind "http" ([check.NAME.http])
// or "https" ([check.NAME.https]): one request to the target, judged by its
// status code and, optionally, a regexp over the start of its body. The
// TLS keys (server_name, ca_file, cert_file, key_file,
// insecure_skip_verify, cert_expiry_warn) are for kind "https" only.
type HTTPCheck struct {
	// Method of the request. Default "GET".
	Method string `toml:"method"`
	// Path (with an optional query) of the request. Default "/".
	Path string `toml:"path"`
	// Host is the Host header (and, for https, the default server name).
	// Default: the target address.
	Host string `toml:"host"`
	// Headers are extra request headers, name = value.
	Headers map[string]string `toml:"headers"`
	// Status lists the accepted status codes: a code ("301"), a range
	// ("200-299") or a class ("2xx"). Default ["200-299"].
	Status []string `toml:"status"`
	// BodyRegexp, when set, must match the first MaxBody bytes of the body.
	BodyRegexp string `toml:"body_regexp"`
	// MaxBody is how many bytes of the body are read. Default 65536.
	MaxBody int `toml:"max_body"`
	// FollowRedirects follows up to 10 redirects and judges the last
	// response. Default false: a redirect is judged as it is.
	FollowRedirects bool `toml:"follow_redirects"`

	// ServerName is the TLS server name (SNI) sent and verified (https).
	// Default: Host without its port, or none for an address.
	ServerName string `toml:"server_name"`
	// CAFile is a PEM file of the CAs that verify the server (https).
	// Default: the system's roots.
	CAFile string `toml:"ca_file"`
	// CertFile is a PEM client certificate, with KeyFile (https).
	CertFile string `toml:"cert_file"`
	// KeyFile is the PEM key of CertFile (https).
	KeyFile string `toml:"key_file"`
	// InsecureSkipVerify accepts any server certificate (https). Default
	// false.
	InsecureSkipVerify bool `toml:"insecure_skip_verify"`
	// CertExpiryWarn is how long before the certificate expires a check
	// that passes says so in its detail (https). Default 336h (14 days).
	CertExpiryWarn Duration `toml:"cert_expiry_warn"`
}

// StatusRange is an inclusive range of HTTP status codes.
type StatusRange struct {
	Lo, Hi int
}

// Contains reports whether code is in r.
func (r StatusRange) Contains(code int) bool { return code >= r.Lo && code <= r.Hi }

// String formats r as it is written in a config ("301", "200-299").
func (r StatusRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(r.Lo)
	}
	return strconv.Itoa(r.Lo) + "-" + strconv.Itoa(r.Hi)
}

// ParseStatus parses one entry of an http check's status list: a code
// ("301"), a range ("200-299") or a class ("2xx"), within 100-599.
func ParseStatus(s string) (StatusRange, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if len(t) == 3 && t[1:] == "xx" && t[0] >= '1' && t[0] <= '5' {
		lo := int(t[0]-'0') * 100
		return StatusRange{lo, lo + 99}, nil
	}
	a, b, isRange := strings.Cut(t, "-")
	lo, err := statusCode(a)
	if err != nil {
		return StatusRange{}, err
	}
	hi := lo
	if isRange {
		if hi, err = statusCode(b); err != nil {
			return StatusRange{}, err
		}
		if hi < lo {
			return StatusRange{}, fmt.Errorf("range %d-%d is empty", lo, hi)
		}
	}
	return StatusRange{lo, hi}, nil
}

func statusCode(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 100 || n > 599 {
		return 0, fmt.Errorf("not a status code (write a code 100-599, a range \"200-299\" or a class \"2xx\")")
	}
	return n, nil
}

// httpDefaults fills the keys an http or https check leaves out, and
// gives a check of those kinds without a sub-table its defaults (a GET of
// / that expects 2xx). m is the [check.NAME] table as decoded generically.
func httpDefaults(k *Check, m map[string]any) {
	var h *HTTPCheck
	switch k.Kind {
	case "http":
		if k.HTTP == nil {
			k.HTTP = &HTTPCheck{}
		}
		h = k.HTTP
	case "https":
		if k.HTTPS == nil {
			k.HTTPS = &HTTPCheck{}
		}
		h = k.HTTPS
	default:
		return
	}
	sub, _ := m[k.Kind].(map[string]any)
	has := func(key string) bool { _, ok := sub[key]; return ok }
	if !has("method") {
		h.Method = DefaultHTTPMethod
	}
	if !has("path") {
		h.Path = DefaultHTTPPath
	}
	if !has("status") {
		h.Status = []string{DefaultHTTPStatus}
	}
	if !has("max_body") {
		h.MaxBody = DefaultHTTPMaxBody
	}
	if k.Kind == "https" && !has("cert_expiry_warn") {
		h.CertExpiryWarn.Duration = DefaultCertExpiryWarn
	}
}

// validateHTTP checks the settings of a check of kind "http" or "https"
// (the table at key path base, raw as decoded generically).
func (d *decoder) validateHTTP(base string, k *Check, raw map[string]any) {
	h := k.HTTP
	if k.Kind == "https" {
		h = k.HTTPS
	}
	if h == nil {
		return
	}
	base = joinKey(base, k.Kind)
	sub, _ := raw[k.Kind].(map[string]any)
	if !httpToken(h.Method) {
		d.p.add(joinKey(base, "method"), h.Method, "not an HTTP method (a token such as GET or HEAD)")
	}
	if u, err := url.ParseRequestURI(h.Path); err != nil || !strings.HasPrefix(h.Path, "/") || u.Host != "" || strings.ContainsAny(h.Path, " \t\r\n#") {
		d.p.add(joinKey(base, "path"), h.Path, `not a request path (write it starting with "/", such as "/healthz?full=1")`)
	}
	if h.Host != "" && !validHostHeader(h.Host) {
		d.p.add(joinKey(base, "host"), h.Host, "not a host name or address with an optional port")
	}
	hkey := joinKey(base, "headers")
	for _, name := range sortedKeys(h.Headers) {
		switch {
		case !httpToken(name):
			d.p.add(joinKey(hkey, name), h.Headers[name], "not a valid header name")
		case strings.EqualFold(name, "host"):
			d.p.add(joinKey(hkey, name), h.Headers[name], "set the Host header with host, not in headers")
		case strings.ContainsAny(h.Headers[name], "\r\n\x00"):
			d.p.add(joinKey(hkey, name), h.Headers[name], "a header value cannot hold CR, LF or NUL")
		}
	}
	skey := joinKey(base, "status")
	if len(h.Status) == 0 {
		d.p.add(skey, "", "must list at least one status code or range")
	}
	for j, s := range h.Status {
		if _, err := ParseStatus(s); err != nil {
			d.p.add(indexKey(skey, j), s, err.Error())
		}
	}
	if _, present := sub["body_regexp"]; present {
		if _, err := regexp.Compile(h.BodyRegexp); err != nil {
			d.p.add(joinKey(base, "body_regexp"), h.BodyRegexp, fmt.Sprintf("does not compile: %v", err))
		}
	}
	if h.MaxBody < 1 || h.MaxBody > MaxHTTPMaxBody {
		d.p.add(joinKey(base, "max_body"), strconv.Itoa(h.MaxBody), fmt.Sprintf("must be between 1 and %d", MaxHTTPMaxBody))
	}
	if k.Kind == "http" {
		for _, key := range []string{"server_name", "ca_file", "cert_file", "key_file", "insecure_skip_verify", "cert_expiry_warn"} {
			if _, present := sub[key]; present {
				d.p.add(joinKey(base, key), scalarText(sub[key]), `a TLS setting: only for checks of kind "https"`)
			}
		}
		return
	}
	if h.ServerName != "" && !validDNSName(h.ServerName) {
		d.p.add(joinKey(base, "server_name"), h.ServerName, "not a valid host name")
	}
	for _, key := range []string{"ca_file", "cert_file", "key_file"} {
		if v, present := sub[key]; present && v == "" {
			d.p.add(joinKey(base, key), "", "must not be empty (leave the key out instead)")
		}
	}
	if (h.CertFile == "") != (h.KeyFile == "") {
		key, val := "key_file", h.CertFile
		if h.CertFile == "" {
			key, val = "cert_file", h.KeyFile
		}
		d.p.add(joinKey(base, key), "", fmt.Sprintf("missing: a client certificate needs both cert_file and key_file (the other is %q)", val))
	}
	if w := h.CertExpiryWarn.Duration; w < 0 {
		d.p.add(joinKey(base, "cert_expiry_warn"), fmtDur(w), "must not be negative")
	}
}

// httpToken reports whether s is an HTTP token (RFC 9110 §5.6.2): a method
// or a header name.
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// validHostHeader reports whether s is a host, an IP address (IPv6 in
// brackets) or either with a port.
func validHostHeader(s string) bool {
	if strings.ContainsAny(s, " \t\r\n/\\@?#") {
		return false
	}
	u, err := url.Parse("http://" + s)
	return err == nil && u.Host == s && u.Hostname() != ""
}
