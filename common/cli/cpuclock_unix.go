//go:build unix

package cli

import (
	"syscall"
	"time"
)

// cpuClockAvailable says whether -clock cpu can read the CPU time here.
const cpuClockAvailable = true

// processCPUTime returns the CPU time, user and system, that every thread
// of the process has used so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
