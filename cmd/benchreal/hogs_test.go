package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary be a hog too, as benchreal's is: startHogs
// runs os.Executable with hogFlag.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == hogFlag {
		hog()
		return
	}
	os.Exit(m.Run())
}

// cpuTicks is the user+system clock ticks of process pid (/proc/PID/stat).
func cpuTicks(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// TestHogsBurnAndStop: a hog keeps its core busy until stopped, and
// stopping leaves no process behind.
func TestHogsBurnAndStop(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to read a hog's CPU time from")
	}
	h, err := startHogs(1)
	require.NoError(t, err)
	pid := h.cmds[0].Process.Pid
	time.Sleep(300 * time.Millisecond)
	busy := cpuTicks(t, pid)
	h.stop()
	// 5 ticks (50 ms at the usual 100 a second) of 300: room for a shared machine.
	assert.GreaterOrEqual(t, busy, 5, "the hog barely ran in 0.3 s")
	assert.Empty(t, h.cmds)
	_, err = os.Stat("/proc/" + strconv.Itoa(pid))
	assert.True(t, os.IsNotExist(err), "the hog outlived stop")
}
