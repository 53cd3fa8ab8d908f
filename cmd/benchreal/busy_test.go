package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two readings of /proc/stat one second apart on a 2-CPU machine, the
// layout the kernel documents (proc(5)): user nice system idle iowait irq
// softirq steal guest guest_nice.
const (
	stat0 = "cpu  1000 10 500 8000 50 5 5 0 0 0\ncpu0 500 5 250 4000 25 3 2 0 0 0\ncpu1 500 5 250 4000 25 2 3 0 0 0\nintr 123 0\nctxt 456\n"
	stat1 = "cpu  1120 10 530 8130 60 5 5 0 0 0\ncpu0 560 5 265 4065 30 3 2 0 0 0\ncpu1 560 5 265 4065 30 2 3 0 0 0\nintr 130 0\nctxt 470\n"
)

func TestParseCPUStat(t *testing.T) {
	a, err := parseCPUStat(stat0)
	require.NoError(t, err)
	assert.Equal(t, cpuTimes{busy: 1000 + 10 + 500 + 5 + 5, total: 9570, cpus: 2}, a)
	b, err := parseCPUStat(stat1)
	require.NoError(t, err)
	// 150 of 290 jiffies busy, over 2 CPUs: 1.03 cores.
	assert.InDelta(t, 2*150.0/290, busyCores(a, b), 1e-12)
	assert.Zero(t, busyCores(b, b), "no time passed")

	_, err = parseCPUStat("intr 1\n")
	assert.ErrorContains(t, err, "no cpu line")
	_, err = parseCPUStat("cpu  1 x 3 4\n")
	assert.Error(t, err)
	old, err := parseCPUStat("cpu  10 0 10 80\ncpu0 10 0 10 80\n")
	require.NoError(t, err, "a kernel before iowait: four fields")
	assert.Equal(t, cpuTimes{busy: 20, total: 100, cpus: 1}, old)
}

func TestBusyMessage(t *testing.T) {
	assert.Empty(t, busyMessage(0.3, 2, time.Second))
	assert.Empty(t, busyMessage(0.5, 2, time.Second), "half a core is allowed")
	assert.Equal(t, "warning: other processes kept 1.0 of 2 cores busy in the 1 s before measuring; the figures will be lower and noisier than on an idle machine",
		busyMessage(1.03, 2, time.Second))
}
