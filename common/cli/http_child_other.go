//go:build !linux

package cli

import "os/exec"

// setChildAttrs does nothing here: only Linux can tie a child's life to
// its parent's. compare still stops its servers on SIGINT and SIGTERM.
func setChildAttrs(*exec.Cmd) {}
