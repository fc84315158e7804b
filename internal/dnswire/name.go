// Package dnswire walks DNS messages in their wire form (RFC 1035
// section 4.1) without unpacking them: the one name walker of the
// health probes' reply judge and the GSLB responder's query path, with
// miekg/dns's rules, so that a message it walks is one miekg/dns
// unpacks.
package dnswire

// SkipName returns the offset after the domain name at off in msg (after
// its first compression pointer, when it has one), or false where
// miekg/dns's UnpackDomainName fails: the same label, length,
// pointer-count and bounds rules (pointers are followed to check them).
func SkipName(msg []byte, off int) (int, bool) {
	const maxPointers = (255+1)/2 - 2 // dns.maxCompressionPointers
	budget, ptrs, after := 255, 0, 0
	for {
		if off >= len(msg) {
			return 0, false
		}
		c := int(msg[off])
		off++
		switch c & 0xC0 {
		case 0x00:
			if c == 0 {
				if ptrs == 0 {
					after = off
				}
				return after, true
			}
			if off+c > len(msg) {
				return 0, false
			}
			if budget -= c + 1; budget <= 0 {
				return 0, false
			}
			off += c
		case 0xC0:
			if off >= len(msg) {
				return 0, false
			}
			c1 := int(msg[off])
			off++
			if ptrs == 0 {
				after = off
			}
			if ptrs++; ptrs > maxPointers {
				return 0, false
			}
			off = (c^0xC0)<<8 | c1
		default:
			return 0, false
		}
	}
}
