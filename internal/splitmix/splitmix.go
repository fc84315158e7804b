// Package splitmix is the SplitMix64 finalizer: a fast, well-spread
// 64-bit mix of a 64-bit value, for hash keys that are not secrets (the
// GSLB pools' hash and rendezvous keys, the fleet's assignments).
package splitmix

// Mix returns x mixed: every bit of the result depends on every bit of
// x (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014).
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
