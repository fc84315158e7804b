//go:build !linux

package control

import "net"

// peerOf cannot read peer credentials on this platform: the socket's mode
// is the only access control.
func peerOf(net.Conn) peer { return peer{} }
