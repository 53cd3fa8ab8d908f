package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// busyLimit is how many cores other processes may keep busy before
// benchreal warns that the figures will suffer.
const busyLimit = 0.5

// cpuTimes is the first line of /proc/stat: jiffies spent busy and in
// all, summed over the CPUs, and how many CPUs there are.
type cpuTimes struct {
	busy, total uint64
	cpus        int
}

// parseCPUStat reads /proc/stat's "cpu" line (user nice system idle
// iowait irq softirq steal ...; guest time is inside user already) and
// counts the "cpuN" lines.
func parseCPUStat(data string) (cpuTimes, error) {
	var t cpuTimes
	found := false
	for _, line := range strings.Split(data, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			t.cpus++
			continue
		}
		if len(f) < 5 {
			return t, fmt.Errorf("/proc/stat: short cpu line %q", line)
		}
		for i, v := range f[1:min(len(f), 9)] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return t, fmt.Errorf("/proc/stat: %q in the cpu line", v)
			}
			t.total += n
			if i != 3 && i != 4 { // idle, iowait
				t.busy += n
			}
		}
		found = true
	}
	if !found {
		return t, fmt.Errorf("/proc/stat: no cpu line")
	}
	return t, nil
}

// busyCores is how many cores were busy between two readings.
func busyCores(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.cpus) * float64(b.busy-a.busy) / float64(b.total-a.total)
}

// busyWarning samples /proc/stat over wait, while benchreal itself only
// sleeps, and returns a warning when other processes kept more than
// busyLimit cores busy; "" when they did not or there is no /proc.
func busyWarning(wait time.Duration) string {
	read := func() (cpuTimes, error) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return cpuTimes{}, err
		}
		return parseCPUStat(string(b))
	}
	a, err := read()
	if err != nil {
		return ""
	}
	time.Sleep(wait)
	b, err := read()
	if err != nil {
		return ""
	}
	return busyMessage(busyCores(a, b), b.cpus, wait)
}

// busyMessage is the warning for cores busy of cpus over wait, or "".
func busyMessage(cores float64, cpus int, wait time.Duration) string {
	if cores <= busyLimit {
		return ""
	}
	return fmt.Sprintf("warning: other processes kept %.1f of %d cores busy in the %.0f s before measuring; the figures will be lower and noisier than on an idle machine", cores, cpus, wait.Seconds())
}
