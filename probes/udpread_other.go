//go:build !linux

package probes

import (
	"net"
	"sync"
)

// readDatagram reads the next datagram from the connected UDP socket conn,
// whole.
func readDatagram(conn net.Conn) ([]byte, error) { return readDatagramFull(conn) }

// recvDatagram consumes the next datagram from the connected UDP socket
// conn, through a buffer of the largest DNS message size from bufs, and
// returns a copy of it, whole.
func recvDatagram(conn *net.UDPConn, bufs *sync.Pool) ([]byte, error) {
	bp := scratch(bufs)
	defer bufs.Put(bp)
	n, err := conn.Read(*bp)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	copy(out, (*bp)[:n])
	return out, nil
}
