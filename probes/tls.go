package probes

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// tlsSettings are the TLS keys of the check kinds that speak TLS (tcp
// with tls, https).
type tlsSettings struct {
	serverName        string
	caFile            string
	certFile, keyFile string
	insecure          bool
	// now is the clock certificates are verified against (nil: time.Now).
	now func() time.Time
}

// clientTLS builds a client TLS configuration, reading the CA and client
// certificate files once: TLS 1.2 or later, verification on unless the
// operator turned it off explicitly.
func clientTLS(s tlsSettings) (*tls.Config, error) {
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         s.serverName,
		InsecureSkipVerify: s.insecure, //nolint:gosec // an explicit, documented operator choice
		Time:               s.now,
	}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", s.caFile)
		}
	}
	if s.certFile != "" || s.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
