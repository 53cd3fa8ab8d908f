package cli

import "syscall"

// memoryLimit returns the most memory a KV pool may take: half of the
// machine's physical memory, leaving room for the weights, the activations
// and everything else on the machine. 0 means unknown (no check).
func memoryLimit() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(info.Totalram) * int64(info.Unit) / 2
}
