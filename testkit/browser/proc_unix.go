//go:build unix

package browser

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a new process group, which Chromium's
// helper processes join.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills every process in the group led by pid. A group that is
// gone already is no error.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
