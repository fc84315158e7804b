package control

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerOf reads the credentials of c's peer with SO_PEERCRED.
func peerOf(c net.Conn) peer {
	if w, ok := c.(interface{ Unwrap() net.Conn }); ok {
		c = w.Unwrap() // a bounded listener's connection
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cerr != nil {
		return peer{}
	}
	return peer{Known: true, UID: cred.Uid, PID: cred.Pid}
}
