//go:build !linux

package probes

// batchProbes is empty where there is no batch engine.
func batchProbes(*DNSProber) []Func { return nil }
