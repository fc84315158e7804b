package splitmix

import (
	"math/bits"
	"testing"
)

// TestMix checks the finalizer's known values and that one bit flipped
// in the input flips about half of the output's (avalanche).
func TestMix(t *testing.T) {
	if got := Mix(0); got != 0 {
		t.Errorf("Mix(0) = %#x, want 0", got)
	}
	// SplitMix64's first output for seed 0 is Mix(0x9e3779b97f4a7c15).
	if got, want := Mix(0x9e3779b97f4a7c15), uint64(0xe220a8397b1dcdaf); got != want {
		t.Errorf("Mix(golden gamma) = %#x, want %#x", got, want)
	}
	total := 0
	for i := range 64 {
		x := uint64(0x0123456789abcdef) * uint64(i+1)
		total += bits.OnesCount64(Mix(x) ^ Mix(x^1<<i))
	}
	if avg := float64(total) / 64; avg < 28 || avg > 36 {
		t.Errorf("one input bit flips %.1f output bits on average, want about 32", avg)
	}
}
