package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
)

func TestSameOutputsNamesTheFirstDifference(t *testing.T) {
	run := func(name string, outputs ...[]int32) *metrics.Run {
		r := &metrics.Run{Name: name}
		for i, o := range outputs {
			r.Requests = append(r.Requests, metrics.RequestRecord{ID: i, Output: o})
		}
		return r
	}
	base := run("baseline", []int32{1, 2}, []int32{3})
	require.NoError(t, sameOutputs([]*metrics.Run{base, run("good", []int32{1, 2}, []int32{3})}))
	require.ErrorContains(t, sameOutputs([]*metrics.Run{base, run("bad", []int32{1, 2}, []int32{4})}),
		"bad: request 1 generated [4]; the baseline generated [3]")

	failed := run("failing", []int32{1, 2}, nil)
	failed.Requests[1].Err = "out of blocks"
	require.ErrorContains(t, sameOutputs([]*metrics.Run{base, failed}), "failing: request 1 failed: out of blocks")
}
