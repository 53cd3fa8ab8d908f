package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// TestShapeChunkedPutsShortRequestsBehindTheLongOnes: the workload sends
// its long prompts last; chunking moves them among the short requests on
// the same arrival grid, and gives them a shared first part.
func TestShapeChunkedPutsShortRequestsBehindTheLongOnes(t *testing.T) {
	p := workload.DefaultParams("chunked_prefill")
	p.Requests, p.LongPrompts, p.LongLen, p.RPS = 4, 2, 40, 10
	reqs, err := workload.Generate("chunked_prefill", p)
	require.NoError(t, err)
	require.NoError(t, shapeChunked(reqs, p, 1, 32))

	var arrivals []time.Duration
	for _, r := range reqs {
		arrivals = append(arrivals, r.Arrival)
	}
	ms := time.Millisecond
	// Short 0, then the long prompts 4 and 5, then shorts 1, 2 and 3.
	assert.Equal(t, []time.Duration{0, 300 * ms, 400 * ms, 500 * ms, 100 * ms, 200 * ms}, arrivals)
	assert.Equal(t, reqs[4].Prompt[:32], reqs[5].Prompt[:32], "the shared part")
	assert.NotEqual(t, reqs[4].Prompt[32:], reqs[5].Prompt[32:], "each long prompt keeps tokens of its own")

	require.Error(t, shapeChunked(reqs, p, 1, 40), "a shared part as long as the prompt")
}

// TestChunkedTimesSplitsTheRequests: behind is the short requests that
// arrived after the first long prompt, long the long prompts, and ITL the
// short requests' gaps only, where a long prefill shows: during it (from
// the first long prompt's arrival to the last one's first token), and
// over the whole run.
func TestChunkedTimesSplitsTheRequests(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	rec := func(id, arrival int, tokens ...int) metrics.RequestRecord {
		r := metrics.RequestRecord{ID: id, Arrival: ms(arrival), FirstToken: ms(tokens[0]), Finish: ms(tokens[len(tokens)-1])}
		for _, at := range tokens {
			r.TokenTimes = append(r.TokenTimes, ms(at))
		}
		return r
	}
	run := &metrics.Run{Requests: []metrics.RequestRecord{
		rec(0, 0, 5, 10, 510, 515, 520), // decoding when the long prompt stalls it
		rec(1, 200, 700, 705),           // behind the long prompt, after its prefill
		rec(2, 100, 600, 900),           // the long prompt: its gap is not a decode's
	}}
	got := chunkedTimes(run, 2, ms(100))
	assert.Equal(t, ms(500), got.behind.P50)
	assert.Equal(t, ms(500), got.long.P50)
	assert.Equal(t, 1, got.long.N)
	assert.Equal(t, 5, got.all.N, "the short requests' five gaps, not the long prompt's")
	assert.Equal(t, ms(500), got.all.Max)
	assert.Equal(t, 3, got.during.N, "the gaps ending in (100 ms, 600 ms]: 10→510, 510→515, 515→520")
	assert.Equal(t, ms(500), got.during.Max)

	med := medianTimes([]chunkTimes{
		{during: metrics.Stats{P99: ms(9), Max: ms(900)}},
		{during: metrics.Stats{P99: ms(1), Max: ms(100)}},
		{during: metrics.Stats{P99: ms(5), Max: ms(500)}},
	})
	assert.Equal(t, ms(5), med.during.P99)
	assert.Equal(t, ms(500), med.during.Max)
}

// TestChunkingCommand runs the chunking table on a tiny model: one
// whole-prompt row and, per budget, a row without and one with the cache;
// the whole-prompt row with the cache is refused by the engine; only the
// cache rows find anything; every configuration generated the same
// tokens; every line fits 120 columns.
func TestChunkingCommand(t *testing.T) {
	dir := smallModel(t, "llama")
	args := []string{"chunking", "-model", dir, "-requests", "4", "-long-prompts", "2", "-long-len", "48", "-long-shared", "32",
		"-suffix-min", "4", "-suffix-max", "8", "-min-tokens", "4", "-max-tokens", "8", "-rps", "1000",
		"-budgets", "16,32", "-max-context", "128", "-runs", "2", "-quiet"}
	var out, errOut bytes.Buffer
	code := Main(cachedVariant, args[:], &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	requireFits(t, "chunking", out.String())
	requireFits(t, "chunking (stderr)", errOut.String())

	lines := strings.Split(out.String(), "\n")
	var rows [][]string
	for _, l := range lines[1:6] {
		rows = append(rows, strings.Fields(l))
	}
	cols := strings.Fields(lines[0])
	hit := slices.Index(cols, "%") // "hit %" is two fields, and the last
	require.Equal(t, len(cols)-1, hit, lines[0])
	want := [][]string{
		{"whole", "prompt", "128", "no"},
		{"chunked", "16", "no"}, {"chunked", "16", "yes"},
		{"chunked", "32", "no"}, {"chunked", "32", "yes"},
	}
	for i, w := range want {
		require.GreaterOrEqual(t, len(rows[i]), len(w), lines[i+1])
		assert.Equal(t, w, rows[i][:len(w)], lines[i+1])
		last := rows[i][len(rows[i])-1]
		if w[len(w)-1] == "yes" {
			assert.NotEqual(t, "0.0", last, "a cache row finds the long prompts' shared part: %s", lines[i+1])
		} else {
			assert.Equal(t, "0.0", last, lines[i+1])
		}
	}
	assert.Contains(t, out.String(), "whole prompt with the testcached cache: refused by the engine")
	assert.Contains(t, out.String(), "each the median of 2 runs")
	assert.Contains(t, out.String(), "cache: testcached's prefix cache")
	assert.Contains(t, out.String(), "outputs: every configuration generated exactly the same tokens for all 6 requests")

	code, wall, stderr := run(append(slices.Clone(args), "-clock", "wall", "-whole=false", "-budgets", "16")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, wall, "times: wall clock")
	assert.Contains(t, out.String(), "times: CPU time of every engine step on one core (-clock cpu)")

	for _, bad := range [][]string{{"-clock", "step:50ms"}, {"-max-batch-tokens", "64"}, {"-chunked-prefill=false"}, {"-workload", "prefix_caching"}} {
		code, _, stderr := run(append(slices.Clone(args), bad...)...)
		assert.NotEqual(t, 0, code, "%v: %s", bad, stderr)
	}
}

// TestCPUClockChargesEachStepItsCPUTime: a step moves the clock by the CPU
// time spent since the step before; a sleep jumps by exactly its length
// and leaves the driver's time before it out of the next step.
func TestCPUClockChargesEachStepItsCPUTime(t *testing.T) {
	if !cpuClockAvailable {
		t.Skip("no getrusage here")
	}
	burn := func(d time.Duration) {
		for start := processCPUTime(); processCPUTime()-start < d; {
		}
	}
	c := newCPUClock()
	t0 := c.Now()
	burn(5 * time.Millisecond)
	c.Stepped()
	step := c.Now().Sub(t0)
	assert.GreaterOrEqual(t, step, 5*time.Millisecond)

	burn(20 * time.Millisecond)
	c.Sleep(time.Second)
	c.Stepped()
	assert.GreaterOrEqual(t, c.Now().Sub(t0), step+time.Second)
	assert.Less(t, c.Now().Sub(t0), step+time.Second+20*time.Millisecond, "the 20 ms before the sleep were charged to the step after it")
}
