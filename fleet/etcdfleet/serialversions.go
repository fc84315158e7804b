package etcdfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
)

// SerialVersionsKey is the key of the fleet's register of configuration
// versions under the [fleet] prefix.
const SerialVersionsKey = "serial/versions"

// serialAttempts bounds the guarded writes of one Version call: each
// lost race re-reads the register, which then holds the winner's write.
const serialAttempts = 8

// ErrSerialConflict is Version's error when every guarded write lost a
// race (other nodes wrote the register each time).
var ErrSerialConflict = errors.New("etcdfleet: serial versions: too many concurrent writes")

// SerialVersions is the fleet's register of configuration versions
// (responder.VersionRegister) in etcd: one JSON document, P/serial/versions,
// holding fleet.Versions ({"max": N, "versions": {hash: version}}), read
// linearizably and written by one transaction guarded by the mod
// revision that was read, so that nodes allocating at once end with one
// version per hash. It is safe for concurrent use.
type SerialVersions struct {
	cli *clientv3.Client
	key string
	// retry is the pause before a broken watch is opened again.
	retry time.Duration
}

// NewSerialVersions returns the register under prefix (the [fleet]
// prefix, ending in "/").
func NewSerialVersions(cli *clientv3.Client, prefix string) *SerialVersions {
	return &SerialVersions{cli: cli, key: prefix + SerialVersionsKey, retry: time.Second}
}

// Key returns the register's etcd key.
func (v *SerialVersions) Key() string { return v.key }

// Version returns the version of hash at least floor, registering one
// when the register has none (fleet.Versions.Assign).
func (v *SerialVersions) Version(ctx context.Context, hash string, floor uint32) (uint32, error) {
	for range serialAttempts {
		doc, rev, err := v.read(ctx)
		if err != nil {
			return 0, err
		}
		n, changed := doc.Assign(hash, floor)
		if !changed {
			return n, nil
		}
		data, err := json.Marshal(doc)
		if err != nil {
			return 0, fmt.Errorf("etcdfleet: serial versions: %w", err)
		}
		resp, err := v.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(v.key), "=", rev)).
			Then(clientv3.OpPut(v.key, string(data))).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("etcdfleet: serial versions: write %s: %w", v.key, err)
		}
		if resp.Succeeded {
			return n, nil
		}
	}
	return 0, ErrSerialConflict
}

// Read returns the register as etcd holds it now.
func (v *SerialVersions) Read(ctx context.Context) (fleet.Versions, error) {
	doc, _, err := v.read(ctx)
	return doc, err
}

// read returns the register and its mod revision (0: no key yet).
func (v *SerialVersions) read(ctx context.Context) (fleet.Versions, int64, error) {
	var doc fleet.Versions
	resp, err := v.cli.Get(ctx, v.key)
	if err != nil {
		return doc, 0, fmt.Errorf("etcdfleet: serial versions: read %s: %w", v.key, err)
	}
	if len(resp.Kvs) == 0 {
		return doc, 0, nil
	}
	kv := resp.Kvs[0]
	if err := json.Unmarshal(kv.Value, &doc); err != nil {
		// Not overwritten: its max is what keeps versions unique.
		return doc, 0, fmt.Errorf("etcdfleet: serial versions: %s is not a register (repair it: every node's serial waits on it): %w", v.key, err)
	}
	return doc, kv.ModRevision, nil
}

// Watch calls changed on every change of the register and whenever its
// watch breaks (the register may have changed meanwhile), until ctx is
// done. The watch requires a leader, so that a member cut off from the
// cluster does not hold it silently.
func (v *SerialVersions) Watch(ctx context.Context, changed func()) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range v.cli.Watch(wctx, v.key) {
			if resp.Err() != nil {
				break
			}
			if len(resp.Events) > 0 {
				changed()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		changed()
		select {
		case <-ctx.Done():
		case <-time.After(v.retry):
		}
	}
}
