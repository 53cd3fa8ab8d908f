//go:build !unix

package cli

import "time"

// cpuClockAvailable says whether -clock cpu can read the CPU time here: not
// without getrusage.
const cpuClockAvailable = false

func processCPUTime() time.Duration { return 0 }
