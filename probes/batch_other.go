//go:build !linux

package probes

// engine is the batch engine of StartCheck, on Linux only; elsewhere DNS
// checks run synchronously.
type engine struct{}

func (*engine) close() error { return nil }

// DroppedReplies is the number of datagrams the batch engine dropped;
// always 0 where there is no batch engine.
func (p *DNSProber) DroppedReplies() int64 { return 0 }

// slot is the batch engine's state of one target, on Linux only.
type slot struct{}
