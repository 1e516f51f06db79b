package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd when the test binary dies, so a
// test killed by -timeout or a signal leaves no redis-server behind for
// the next run to trip over (a port adopted by an old sentinel).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
