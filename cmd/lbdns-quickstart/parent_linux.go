package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithParent asks the kernel to send SIGTERM to this process when its
// parent exits (prctl PR_SET_PDEATHSIG), and sends it at once if the parent
// is already gone.
func dieWithParent() { dieWithParentSignal(syscall.SIGTERM) }

// dieWithParentSignal is dieWithParent with the signal sig.
func dieWithParentSignal(sig syscall.Signal) {
	ppid := os.Getppid()
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0)
	if os.Getppid() != ppid {
		syscall.Kill(os.Getpid(), sig)
	}
}
