// Package etcdfleet is the etcd edge of a fleet of LB hosts: the
// connection (TLS with a client certificate, always verified), the
// operator intent shared through etcd (an intent.Store), and the nodes'
// heartbeats held under their leases with the reader and the watcher
// (WatchNodes) of the fleet view.
//
// Keys, all under the [fleet] prefix P:
//
//	P/intent/fleet             the GSLB emergency switches, TTL raises and client actions (the whole fleet's)
//	P/intent/cluster/CLUSTER   the resolver overrides of a cluster of hosts sharing back ends
//	P/intent/host/NAME         the resolver overrides of a host in no cluster
//	P/nodes/NAME               a node's heartbeat, under its lease
//	P/votes/MEMBER/NAME        node NAME's vote on a GSLB member, under its lease
//	P/serial/versions          the configuration versions behind the SOA serial, one per served hash (SerialVersions)
//
// The intent documents are intent.Marshal's JSON, each holding only the
// kinds of its scope. The intent revision of a node is the larger of the
// etcd mod revisions of its two intent keys (the fleet's and its
// cluster's or host's); a write is one transaction guarded by both.
package etcdfleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"lbdns/configs"
)

// Keys are the etcd keys of one node, under the fleet's prefix.
type Keys struct {
	// Prefix is the [fleet] prefix ("/lbdns/").
	Prefix string
	// Fleet is the fleet-wide intent; Scope the node's cluster's or
	// host's; Node its heartbeat.
	Fleet, Scope, Node string
}

// KeysOf returns the keys of node name in cluster (the host's own scope
// when cluster is "") under prefix.
func KeysOf(prefix, cluster, name string) Keys {
	return Keys{Prefix: prefix, Fleet: prefix + "intent/fleet", Scope: scopeKey(prefix, cluster, name), Node: prefix + "nodes/" + name}
}

func scopeKey(prefix, cluster, name string) string {
	if cluster != "" {
		return prefix + "intent/cluster/" + cluster
	}
	return prefix + "intent/host/" + name
}

// Connect connects to the etcd cluster of f and checks, within
// f.DialTimeout, that this node may read its prefix. Its errors say what
// to fix: the TLS files, a certificate etcd refuses, a role without the
// prefix, no member reachable.
func Connect(ctx context.Context, f *configs.Fleet) (*clientv3.Client, error) {
	cli, err := Open(ctx, f)
	var ue *UnreachableError
	if errors.As(err, &ue) {
		cli.Close()
		return nil, err
	}
	return cli, err
}

// UnreachableError is Open's error when no etcd member answered within
// the dial timeout and none refused the node's certificate: etcd may be
// down or cut off, and the client Open returns with it keeps trying.
type UnreachableError struct{ Err error }

// Error returns the explained error.
func (e *UnreachableError) Error() string { return e.Err.Error() }

// Unwrap returns the explained error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Open is Connect for a node that may start while etcd is unreachable:
// when no member answers within f.DialTimeout and none refused the
// node's certificate, it returns the client (which keeps reconnecting in
// the background; the caller closes it) with an *UnreachableError.
// Every other error (TLS files, a certificate or a role etcd refuses)
// comes with a nil client.
func Open(ctx context.Context, f *configs.Fleet) (*clientv3.Client, error) {
	tlsInfo := transport.TLSInfo{TrustedCAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	tc, err := tlsInfo.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("fleet: TLS files (fleet.ca_file, cert_file, key_file): %w", err)
	}
	eps := make([]string, len(f.Endpoints))
	for i, e := range f.Endpoints {
		eps[i] = configs.FleetEndpointHostPort(e)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		TLS:                  tc,
		DialTimeout:          f.DialTimeout.Duration,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: connect to etcd %s: %w", strings.Join(eps, ", "), err)
	}
	cctx, cancel := context.WithTimeout(ctx, f.DialTimeout.Duration)
	defer cancel()
	_, err = retried(cctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return cli.Get(ctx, f.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	})
	if err == nil {
		return cli, nil
	}
	if IsUnreachable(err) && !isTLSError(err) {
		// The client retries a refused handshake until the deadline:
		// ask the members directly why.
		if terr := probeAll(ctx, eps, tc); terr != nil {
			cli.Close()
			return nil, Explain(terr, f)
		}
		return cli, &UnreachableError{Err: Explain(err, f)}
	}
	cli.Close()
	return nil, Explain(err, f)
}

// IsUnreachable reports whether err, from a request to etcd, says that
// no member with a leader answered in time (down, cut off, or without a
// quorum), rather than that etcd refused or failed the request.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrNoLeader) ||
		errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) || errors.Is(err, rpctypes.ErrLeaderChanged)
}

// probeAll probes every endpoint at once (probeTLS) and returns the
// first TLS error, with its endpoint.
func probeAll(ctx context.Context, eps []string, tc *tls.Config) error {
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			if terr := probeTLS(ctx, ep, tc); terr != nil {
				errs[i] = fmt.Errorf("%s: %w", ep, terr)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// probeTLS makes one TLS connection to endpoint and reports the TLS
// error that ends it, if any: a member that refuses the client
// certificate sends its alert right after the handshake. A connection
// that stays open (the member waits for the client's first frame) or
// that cannot be made at all is no TLS error (nil).
func probeTLS(ctx context.Context, endpoint string, tc *tls.Config) error {
	cfg := tc.Clone()
	cfg.NextProtos = []string{"h2"}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", endpoint)
	if err != nil {
		if isTLSError(err) {
			return err
		}
		return nil
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	if err != nil && isTLSError(err) {
		return err
	}
	return nil
}

// isTLSError reports whether err comes from TLS or certificate checks.
func isTLSError(err error) bool {
	var (
		alert tls.AlertError
		rec   tls.RecordHeaderError
		cv    *tls.CertificateVerificationError
	)
	msg := err.Error()
	return errors.As(err, &alert) || errors.As(err, &rec) || errors.As(err, &cv) ||
		strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate")
}

// Explain words an error of the first request to etcd for an operator.
func Explain(err error, f *configs.Fleet) error {
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("fleet: etcd refuses this node the prefix %s: grant the role of the etcd user named by the common name of fleet.cert_file (%s) read and write on it: %w", f.Prefix, f.CertFile, err)
	case errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrUserNotFound):
		return fmt.Errorf("fleet: etcd knows no user for this node's certificate (%s): add the user named by its common name: %w", f.CertFile, err)
	case isTLSError(err):
		return fmt.Errorf("fleet: etcd refused the TLS connection: check that fleet.cert_file (%s) was issued by a CA the etcd members trust and that fleet.ca_file (%s) holds the CA of their certificates: %w", f.CertFile, f.CAFile, err)
	case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("fleet: no etcd member of %s answered within fleet.dial_timeout (%s) (unreachable, or refusing this node's certificate: check fleet.cert_file and ca_file): %w",
			strings.Join(f.Endpoints, ", "), f.DialTimeout.Duration, err)
	}
	return fmt.Errorf("fleet: etcd: %w", err)
}

// ServerVersion returns the etcd version of the first member of cli's
// endpoints that answers, and whether it is older than 3.5 (3.4 is end of
// life and lacks watch fixes: duplicated events, responses back in time,
// events lost after a compaction).
func ServerVersion(ctx context.Context, cli *clientv3.Client) (version string, old bool, err error) {
	for _, ep := range cli.Endpoints() {
		resp, serr := cli.Status(ctx, ep)
		if serr != nil {
			err = serr
			continue
		}
		major, minor := 0, 0
		fmt.Sscanf(resp.Version, "%d.%d", &major, &minor)
		return resp.Version, major < 3 || major == 3 && minor < 5, nil
	}
	return "", false, fmt.Errorf("fleet: etcd version: %w", err)
}
