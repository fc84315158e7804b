// Package lab is the root of the lab the quick start and the tests share:
// the Debian resolver products run on loopback (vendors) and the small
// authoritative server they forward to (dnstest). lbdns-quickstart and
// tests import them; lbdnsd and lbctl do not.
package lab
