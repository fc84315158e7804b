package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority for one test cluster.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	// File is the CA certificate's PEM file.
	File string
	// IPs are addresses, besides 127.0.0.1, that the certificates it
	// issues are valid for.
	IPs []net.IP
}

// NewCA makes a CA whose certificate is written to dir/name.pem.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: ca certificate: %w", err)
	}
	ca := &CA{cert: cert, key: key, dir: dir, File: filepath.Join(dir, name+".pem")}
	if err := writePEM(ca.File, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate for common name cn (the etcd user of a
// client certificate), valid for 127.0.0.1 (and ca.IPs) and localhost, for server and
// client use, and writes it and its key to dir/file.pem and
// dir/file-key.pem, whose paths it returns.
func (ca *CA) Issue(file, cn string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("etcdtest: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", fmt.Errorf("etcdtest: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1)}, ca.IPs...),
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", fmt.Errorf("etcdtest: certificate %s: %w", cn, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("etcdtest: key %s: %w", cn, err)
	}
	certFile, keyFile = filepath.Join(ca.dir, file+".pem"), filepath.Join(ca.dir, file+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	return nil
}
