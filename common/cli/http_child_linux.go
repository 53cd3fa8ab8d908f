package cli

import (
	"os/exec"
	"syscall"
)

// setChildAttrs asks the kernel to send the server SIGTERM if this process
// dies without stopping it (killed, or crashed), so that no server is left
// holding a port and a core.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
