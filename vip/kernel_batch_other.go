//go:build !linux

package vip

import "fmt"

// batchConn is empty off Linux, where there is no netlink.
type batchConn struct{}

// ApplyBatch implements BatchClient one op at a time.
func (k *KernelClient) ApplyBatch(ops []Op) []error {
	return ApplyEach(k, ops)
}

// BatchSends returns the number of sendmsg calls ApplyBatch has made: none
// off Linux.
func (k *KernelClient) BatchSends() uint64 { return 0 }

// closeBatch has nothing to close off Linux.
func (k *KernelClient) closeBatch() error { return nil }

// write fails off Linux, where there is no netlink.
func (k *KernelClient) write(op Op) error {
	return fmt.Errorf("vip: %s: %w", op, ErrIPVSUnavailable)
}
