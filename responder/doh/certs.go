// Package doh is the GSLB responder's encrypted fronts beside its UDP
// and TCP: DNS over HTTPS (RFC 8484: GET and POST of
// application/dns-message, HTTP/2 and HTTP/1.1 over TLS), the HTTPDNS
// JSON API (the application/dns-json shape of Google's and
// Cloudflare's resolvers, batch lookups, optional signed URLs), the
// certificate they and DNS over TLS share (read again when its files
// change, without a restart), where a client is (the connection's
// address; X-Forwarded-For and the PROXY protocol v2 from trusted
// proxies; ip= and Client Subnet only when the operator allows them),
// and the listeners' limits. It answers nothing itself: every query
// goes through the responder's one answer path (Answerer).
//
// The pure parts (the requests' decoding, the replies' JSON, the
// signature, X-Forwarded-For, the PROXY header) are functions of their
// inputs; the I/O (sockets, files, the clock) is at the edges.
package doh

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Certs is a certificate and key pair read from PEM files, read again
// when a file changes: a handshake looks at the files at most once per
// Every (their size, modification time and contents), and a pair that
// changed and loads replaces the one served; one that does not load is
// reported (Failed) and the last good pair keeps serving. Safe for
// concurrent use.
type Certs struct {
	certFile, keyFile string
	every             time.Duration
	now               func() time.Time
	// Reloaded, when set, hears every read of a changed pair: its error
	// (nil: the new pair serves).
	Reloaded func(err error)

	mu      sync.Mutex
	cert    *tls.Certificate
	checked time.Time
	stamp   fileStamp
	certPEM []byte
	keyPEM  []byte
}

// fileStamp is what tells that the files changed without reading them.
type fileStamp struct {
	certSize, keySize int64
	certMod, keyMod   time.Time
}

// LoadCerts reads the pair of certFile and keyFile, checked again at
// most once per every (a handshake's), with now the clock (nil:
// time.Now). Its error says which file and what is wrong.
func LoadCerts(certFile, keyFile string, every time.Duration, now func() time.Time) (*Certs, error) {
	if now == nil {
		now = time.Now
	}
	c := &Certs{certFile: certFile, keyFile: keyFile, every: every, now: now}
	st, err := c.statFiles()
	if err != nil {
		return nil, err
	}
	cert, cpem, kpem, err := c.read()
	if err != nil {
		return nil, err
	}
	c.cert, c.stamp, c.certPEM, c.keyPEM, c.checked = cert, st, cpem, kpem, now()
	return c, nil
}

// CheckPair reads the pair of certFile and keyFile as LoadCerts does and
// returns its error (a configuration check).
func CheckPair(certFile, keyFile string) error {
	_, err := LoadCerts(certFile, keyFile, time.Hour, nil)
	return err
}

// statFiles returns the files' stamp.
func (c *Certs) statFiles() (fileStamp, error) {
	cs, err := os.Stat(c.certFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls certificate: %w", err)
	}
	ks, err := os.Stat(c.keyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls key: %w", err)
	}
	return fileStamp{certSize: cs.Size(), keySize: ks.Size(), certMod: cs.ModTime(), keyMod: ks.ModTime()}, nil
}

// read reads and checks the pair: a key that matches the certificate,
// a certificate that parses.
func (c *Certs) read() (*tls.Certificate, []byte, []byte, error) {
	cpem, err := os.ReadFile(c.certFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tls certificate: %w", err)
	}
	kpem, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tls key: %w", err)
	}
	cert, err := tls.X509KeyPair(cpem, kpem)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tls certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, nil, fmt.Errorf("tls certificate %s: %w", c.certFile, err)
		}
	}
	return &cert, cpem, kpem, nil
}

// Certificate returns the pair to serve, looking at the files first
// when Every has passed since the last look.
func (c *Certs) Certificate() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); now.Sub(c.checked) >= c.every {
		c.checked = now
		c.refreshLocked()
	}
	return c.cert
}

// Reload looks at the files now and returns the error of a changed pair
// that does not load (nil: unchanged, or the new pair serves).
func (c *Certs) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked = c.now()
	return c.refreshLocked()
}

// refreshLocked reads the pair again when the files' stamp or contents
// changed; c.mu held.
func (c *Certs) refreshLocked() error {
	st, err := c.statFiles()
	if err == nil && st == c.stamp {
		return nil
	}
	var cert *tls.Certificate
	var cpem, kpem []byte
	if err == nil {
		cert, cpem, kpem, err = c.read()
	}
	if err == nil && bytes.Equal(cpem, c.certPEM) && bytes.Equal(kpem, c.keyPEM) {
		c.stamp = st // touched, not changed
		return nil
	}
	if err == nil {
		c.cert, c.stamp, c.certPEM, c.keyPEM = cert, st, cpem, kpem
	}
	if c.Reloaded != nil {
		c.Reloaded(err)
	}
	return err
}

// NotAfter is when the certificate served expires.
func (c *Certs) NotAfter() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert.Leaf.NotAfter
}

// Subject is the subject of the certificate served ("CN=gslb.example").
func (c *Certs) Subject() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert.Leaf.Subject.String()
}

// TLSConfig returns a server configuration serving c's pair, TLS 1.2 at
// least, offering protos by ALPN (nil: none).
func (c *Certs) TLSConfig(protos []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := c.Certificate(); cert != nil {
				return cert, nil
			}
			return nil, errors.New("doh: no certificate")
		},
	}
}
