package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/workload"
	"kvlab/internal/testgate"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// tradeOffRow is one configuration's line of the trade-off table.
type tradeOffRow struct {
	name string
	// endKV is the blocks over all layers the requests held at their ends,
	// summed; peakKV the most the pool held at once, over all layers.
	endKV, peakKV int
	// pool is the pool's size, over all layers.
	pool                                int
	cached, queried, prefill, preempted int
}

// driven adapts the engine to the workload driver, as the runnables' bench
// does: every request generates its max_tokens.
type driven struct{ e *Engine }

func (d driven) Submit(id int, prompt []int32, maxTokens int) error {
	return d.e.Submit(Request{ID: id, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true})
}

func (d driven) Step() []workload.Token {
	var out []workload.Token
	for _, o := range d.e.Step() {
		out = append(out, workload.Token{ID: o.ID, Token: o.Token, Done: o.Done, Err: o.Err})
	}
	return out
}

func (d driven) Busy() bool { return d.e.Busy() }

// TestWindowFreeTradeOff measures, on the full-size prefix_caching
// workload (48 requests sharing a 1,024-token prefix, as
// `make phase08 MODEL=gemma3` runs it) and multi_turn (8 conversations of
// 4 turns), with 50 ms virtual steps, the built-in Gemma-3 (3 local layers
// of window 256, 1 global) and the runnables' default engine settings, what
// each configuration holds and reuses: the baseline keeping every block,
// the baseline with WindowFree (and a local storage of 384 blocks), and the
// three prefix caches (which keep every block). It checks that every
// configuration generates the first one's tokens and pins the counts
// docs/gemma3.md quotes. Run with -v for the tables.
func TestWindowFreeTradeOff(t *testing.T) {
	testgate.Long(t, "runs two full-size workloads six times each on the built-in Gemma-3, minutes of CPU")
	opts, err := model.BuiltinFor("gemma3")
	require.NoError(t, err)
	m := modeltest.LoadOptions(t, opts)
	// Per workload and configuration: end KV, peak KV (blocks over all
	// layers), cached, queried and prefill tokens, preemptions.
	want := map[string][][]int{
		"prefix_caching": {
			{14240, 4092, 0, 52945, 54050, 1},
			{5981, 1971, 0, 52945, 54050, 1},
			{5981, 1971, 0, 52945, 54050, 1},
			{14240, 2048, 48128, 52945, 4817, 0},
			{14240, 2048, 48128, 52945, 4817, 0},
			{14240, 2048, 48128, 52945, 4817, 0},
		},
		"multi_turn": {
			{11384, 3008, 0, 42832, 42832, 0},
			{4472, 1436, 0, 42832, 42832, 0},
			{4472, 1436, 0, 42832, 42832, 0},
			{11384, 1492, 39104, 42832, 3728, 0},
			{11384, 1492, 39104, 42832, 3728, 0},
			{11384, 1492, 39104, 42832, 3728, 0},
		},
	}
	for _, w := range []string{"prefix_caching", "multi_turn"} {
		t.Run(w, func(t *testing.T) {
			require.Equal(t, want[w], tradeOff(t, m, w), "end KV, peak KV, cached, queried, prefill, preempted")
		})
	}
}

// tradeOff runs workload w through every configuration, logs the table and
// returns its counts.
func tradeOff(t *testing.T, m *model.Model, w string) [][]int {
	mc := m.Config
	local := 0
	for l := range mc.NumHiddenLayers {
		if mc.LayerWindow(l) > 0 {
			local++
		}
	}
	global := mc.NumHiddenLayers - local
	p := workload.DefaultParams(w)
	p.Vocab = mc.VocabSize
	reqs, err := workload.Generate(w, p)
	require.NoError(t, err)

	configs := []struct {
		name  string
		free  bool
		local int // -local-blocks
		cache func(*kvcache.Allocator, int) kvcache.PrefixCache
	}{
		{"baseline, every block kept", false, 0, nil},
		{"baseline, -window-free", true, 0, nil},
		{"... -local-blocks 384", true, 384, nil},
		{"radix tree (prefix)", false, 0, radix.PrefixCache},
		{"hash + CoW (hashcow)", false, 0, blockhash.PrefixCache},
		{"compressed trie", false, 0, trie.PrefixCache},
	}
	var rows []tradeOffRow
	var outputs [][][]int32
	for _, c := range configs {
		cfg := DefaultConfig()
		cfg.WindowFree, cfg.LocalBlocks, cfg.PrefixCache = c.free, c.local, c.cache
		e := newTestEngine(t, m, cfg)
		run, err := workload.Run(driven{e}, reqs, workload.RunOptions{Name: c.name, Clock: workload.NewStepClock(50 * time.Millisecond)})
		require.NoError(t, err)
		var outs [][]int32
		for _, r := range run.Requests {
			require.Empty(t, r.Err, "%s: request %d", c.name, r.ID)
			outs = append(outs, r.Output)
		}
		outputs = append(outputs, outs)
		s := e.Stats()
		row := tradeOffRow{name: c.name, cached: s.CachedTokens, queried: s.QueriedTokens, prefill: s.PrefillTokens, preempted: s.Preemptions}
		row.pool = cfg.NumBlocks * mc.NumHiddenLayers
		if c.free {
			row.pool = cfg.NumBlocks*global + localBlocks(cfg)*local
			row.endKV = s.EndBlocks*global + s.EndLocalBlocks*local
			row.peakKV = s.PeakBlocks*global + s.PeakLocalBlocks*local
		} else {
			row.endKV = s.EndBlocks * mc.NumHiddenLayers
			row.peakKV = s.PeakBlocks * mc.NumHiddenLayers
		}
		rows = append(rows, row)
	}
	for i := range outputs[1:] {
		if diff := cmp.Diff(outputs[0], outputs[i+1]); diff != "" {
			t.Fatalf("%s generated other tokens than %s:\n%s", configs[i+1].name, configs[0].name, diff)
		}
	}

	cfg := DefaultConfig()
	kib := float64(cfg.BlockSize*2*mc.KVDim()*4) / 1024 // one block of one layer, K and V, float32
	n := float64(len(reqs))
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d requests; %d global and %d local layers; a block of one layer is %.0f KiB\n", w, len(reqs), global, local, kib)
	fmt.Fprintf(&b, "%-28s %11s %12s %8s %9s %9s %7s %12s %10s\n", "configuration", "KV/request", "KiB/request", "peak KV", "peak KiB", "pool KiB", "hit %", "prefill tok", "preempted")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-28s %11.1f %12.1f %8d %9.0f %9.0f %7.1f %12d %10d\n", r.name, float64(r.endKV)/n, float64(r.endKV)/n*kib,
			r.peakKV, float64(r.peakKV)*kib, float64(r.pool)*kib, 100*float64(r.cached)/float64(r.queried), r.prefill, r.preempted)
	}
	t.Logf("trade-off (KV in blocks over all layers):\n%s", b.String())

	var got [][]int
	for _, r := range rows {
		got = append(got, []int{r.endKV, r.peakKV, r.cached, r.queried, r.prefill, r.preempted})
	}
	return got
}
