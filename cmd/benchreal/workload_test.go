package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/workload"
)

// commonPrefix is how many leading tokens a and b share.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// workloadOptions are the serving run's flags at their defaults, on a
// vocabulary small enough that chance coincidences would show.
func workloadOptions() options {
	return options{requests: 32, systems: 4, systemLen: 256, suffixMin: 16, suffixMax: 64, output: 32}
}

// TestServingRequestsShared: the shared run's requests share exactly
// their system prompt with the others of the same one (at least its
// tokens, and less than a block more), and less than a block with the
// rest.
func TestServingRequestsShared(t *testing.T) {
	o := workloadOptions()
	reqs, err := servingRequests(o, 300, 7, servingRun{shared: true})
	require.NoError(t, err)
	require.Len(t, reqs, o.requests)
	heads := map[string]bool{}
	for i, a := range reqs {
		heads[fmt.Sprint(a.Prompt[:o.systemLen])] = true
		for _, b := range reqs[i+1:] {
			n := commonPrefix(a.Prompt, b.Prompt)
			if slices.Equal(a.Prompt[:o.systemLen], b.Prompt[:o.systemLen]) {
				assert.GreaterOrEqual(t, n, o.systemLen)
				assert.Less(t, n, o.systemLen+16, "a shared system prompt and then more than a block")
			} else {
				assert.Less(t, n, 16, "two system prompts share a block")
			}
		}
	}
	assert.LessOrEqual(t, len(heads), o.systems)
	assert.Greater(t, len(heads), 1, "every request on one system prompt")
}

// TestServingRequestsNeutral: without a shared prefix, no two prompts
// start with the same token, so no cache can reuse a block of one for
// another, and the run is the shared one's in everything else: request
// count, prompt lengths, suffixes, outputs.
func TestServingRequestsNeutral(t *testing.T) {
	o := workloadOptions()
	shared, err := servingRequests(o, 300, 7, servingRun{shared: true})
	require.NoError(t, err)
	neutral, err := servingRequests(o, 300, 7, servingRun{})
	require.NoError(t, err)
	require.Len(t, neutral, len(shared))
	firsts := map[int32]bool{}
	for i, q := range neutral {
		assert.False(t, firsts[q.Prompt[0]], "request %d starts as another does", i)
		firsts[q.Prompt[0]] = true
		for _, b := range neutral[i+1:] {
			assert.Zero(t, commonPrefix(q.Prompt, b.Prompt))
		}
		assert.Len(t, q.Prompt, len(shared[i].Prompt), "request %d", i)
		assert.Equal(t, shared[i].MaxTokens, q.MaxTokens, "request %d", i)
		assert.Equal(t, shared[i].Prompt[o.systemLen:], q.Prompt[o.systemLen:], "request %d: its suffix", i)
		for _, id := range q.Prompt {
			require.True(t, id >= 0 && id < 300, id)
		}
	}

	_, err = servingRequests(o, 20, 7, servingRun{})
	assert.ErrorContains(t, err, "vocabulary has 20")
}

// TestServingRequestsUnderLoad: a run under load is its idle twin in
// lengths and in what its prompts share, in prompts none of which starts
// with a block of any idle run's prompt, so the cache the idle runs left
// behind cannot serve it.
func TestServingRequestsUnderLoad(t *testing.T) {
	o := workloadOptions()
	for _, shared := range []bool{true, false} {
		idle, err := servingRequests(o, 300, 7, servingRun{shared: shared})
		require.NoError(t, err)
		loaded, err := servingRequests(o, 300, 7, servingRun{shared: shared, hogs: 2})
		require.NoError(t, err)
		require.Len(t, loaded, len(idle))
		for i, q := range loaded {
			assert.Len(t, q.Prompt, len(idle[i].Prompt))
			assert.Equal(t, idle[i].MaxTokens, q.MaxTokens)
			for j, p := range loaded {
				assert.Equal(t, commonPrefix(idle[i].Prompt, idle[j].Prompt), commonPrefix(q.Prompt, p.Prompt), "requests %d and %d", i, j)
			}
			for _, seen := range append(idle, mustRequests(t, o, !shared)...) {
				assert.Less(t, commonPrefix(q.Prompt, seen.Prompt), 16, "request %d (shared %v) starts as an idle run's", i, shared)
			}
		}
	}
}

// mustRequests is the idle run's requests of round 7.
func mustRequests(t *testing.T, o options, shared bool) []workload.Request {
	reqs, err := servingRequests(o, 300, 7, servingRun{shared: shared})
	require.NoError(t, err)
	return reqs
}

// TestServingRunLabels: the rows say which run they are.
func TestServingRunLabels(t *testing.T) {
	var labels []string
	for _, k := range servingRuns(3) {
		labels = append(labels, k.label())
	}
	assert.Equal(t, []string{"shared prefix", "no shared prefix", "shared prefix, under load (3 hogs)", "no shared prefix, under load (3 hogs)"}, labels)
	assert.Len(t, servingRuns(0), 2, "no load runs without -hogs")
}
