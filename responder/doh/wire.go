package doh

import (
	"encoding/binary"

	"lbdns/internal/dnswire"
)

// The DNS wire constants the fronts need.
const (
	typeOPT    = 41
	optionECS  = 8
	headerSize = 12
)

// StripECS returns the DNS message b without the Client Subnet options
// of its OPT record (b changed in place, shortened): a front that does
// not let its clients say where they are answers as if they had sent
// none. A message it cannot walk is returned as it is (the answer path
// answers it FORMERR, as over UDP).
func StripECS(b []byte) []byte {
	if len(b) < headerSize {
		return b
	}
	be := binary.BigEndian
	qd := int(be.Uint16(b[4:]))
	rrs := int(be.Uint16(b[6:])) + int(be.Uint16(b[8:]))
	ar := int(be.Uint16(b[10:]))
	off := headerSize
	for range qd {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+4 > len(b) {
			return b
		}
		off += 4
	}
	for i := range rrs + ar {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+10 > len(b) {
			return b
		}
		typ := be.Uint16(b[off:])
		rdlen := off + 8
		rd := off + 10
		end := rd + int(be.Uint16(b[rdlen:]))
		if end > len(b) {
			return b
		}
		if i < rrs || typ != typeOPT {
			off = end
			continue
		}
		// Walk the options; copy down every one but Client Subnet.
		w := rd
		for o := rd; o < end; {
			if o+4 > end {
				return b
			}
			n := 4 + int(be.Uint16(b[o+2:]))
			if o+n > end {
				return b
			}
			if be.Uint16(b[o:]) != optionECS {
				copy(b[w:], b[o:o+n])
				w += n
			}
			o += n
		}
		if w == end {
			off = end
			continue
		}
		cut := end - w
		copy(b[w:], b[end:])
		b = b[:len(b)-cut]
		be.PutUint16(b[rdlen:], uint16(w-rd))
		off = w
	}
	return b
}

// MinTTL returns the smallest TTL of the records of the DNS message b's
// answer and authority sections (the OPT record has none), and whether
// it has any: what a reply may be cached for (RFC 8484 section 5.1). A
// message it cannot walk has none.
func MinTTL(b []byte) (uint32, bool) {
	if len(b) < headerSize {
		return 0, false
	}
	be := binary.BigEndian
	qd := int(be.Uint16(b[4:]))
	rrs := int(be.Uint16(b[6:])) + int(be.Uint16(b[8:]))
	off := headerSize
	for range qd {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+4 > len(b) {
			return 0, false
		}
		off += 4
	}
	var least uint32
	found := false
	for range rrs {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+10 > len(b) {
			return 0, false
		}
		ttl := be.Uint32(b[off+4:])
		if be.Uint16(b[off:]) != typeOPT && (!found || ttl < least) {
			least, found = ttl, true
		}
		off += 10 + int(be.Uint16(b[off+8:]))
		if off > len(b) {
			return 0, false
		}
	}
	return least, found
}
