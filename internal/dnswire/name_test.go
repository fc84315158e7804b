package dnswire

import (
	"testing"

	"github.com/miekg/dns"
)

// names are messages whose name at offset 0 or 2 SkipName and
// dns.UnpackDomainName must agree on.
var names = [][]byte{
	{0},
	{3, 'w', 'w', 'w', 0},
	{3, 'w', 'w', 'w', 4, 't', 'e', 's', 't', 0, 0xC0, 0},
	{0xC0, 2, 1, 'a', 0},
	{0xC0, 0},
	{0xC0},
	{3, 'a', 'b'},
	{0x40, 0},
	{0x80, 0},
	{1, 'a', 0xC0, 0},
	append(append([]byte{}, long(63, 4)...), 0),
	append(append([]byte{}, long(63, 3)...), 61, 'x'),
}

// long is n labels of size bytes.
func long(size, n int) []byte {
	var b []byte
	for range n {
		b = append(b, byte(size))
		for range size {
			b = append(b, 'a')
		}
	}
	return b
}

// TestSkipName compares SkipName with miekg/dns on names of every rule:
// plain, compressed, looping, cut short, reserved label types, too long.
func TestSkipName(t *testing.T) {
	for i, msg := range names {
		for _, off := range []int{0, 2} {
			if off > len(msg) {
				continue
			}
			same(t, i, msg, off)
		}
	}
}

// FuzzSkipName compares SkipName with miekg/dns on any bytes.
func FuzzSkipName(f *testing.F) {
	for _, msg := range names {
		f.Add(msg, uint8(0))
	}
	f.Fuzz(func(t *testing.T, msg []byte, off uint8) {
		if int(off) > len(msg) {
			return
		}
		same(t, -1, msg, int(off))
	})
}

// same fails t when SkipName and dns.UnpackDomainName disagree on the
// name at off in msg (case i).
func same(t *testing.T, i int, msg []byte, off int) {
	t.Helper()
	_, wantOff, err := dns.UnpackDomainName(msg, off)
	got, ok := SkipName(msg, off)
	if ok != (err == nil) || ok && got != wantOff {
		t.Errorf("case %d off %d (%x): SkipName = %d, %v; miekg/dns = %d, %v", i, off, msg, got, ok, wantOff, err)
	}
}
