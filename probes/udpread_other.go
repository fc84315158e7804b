//go:build !linux

package probes

import (
	"net"
)

// readDatagram reads the next datagram from the connected UDP socket conn,
// whole.
func readDatagram(conn net.Conn) ([]byte, error) { return readDatagramFull(conn) }
