package main

import (
	"os"
	"syscall"
)

// dieWithParent asks the kernel to send SIGTERM to this process when its
// parent exits (prctl PR_SET_PDEATHSIG), and sends it at once if the parent
// is already gone.
func dieWithParent() { dieWithParentSignal(syscall.SIGTERM) }

// dieWithParentSignal is dieWithParent with the signal sig.
func dieWithParentSignal(sig syscall.Signal) {
	const prSetPdeathsig = 1
	ppid := os.Getppid()
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(sig), 0)
	if os.Getppid() != ppid {
		syscall.Kill(os.Getpid(), sig)
	}
}
