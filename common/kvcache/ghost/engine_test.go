package ghost

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/workload"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// traceWorkloads are the recorded traces the engine tests replay: small
// sizes of four workloads, each under a pool that cannot keep what they
// share, so the caches evict all the time. prefix_caching's requests are
// spread over three salts.
var traceWorkloads = []struct {
	name   string
	salted bool
	blocks int // the pool, in blocks of 16 tokens
	params func(p *workload.Params)
}{
	{"prefix_caching", true, 32, func(p *workload.Params) {
		p.Requests, p.PrefixLen, p.SuffixMin, p.SuffixMax, p.OutputMin, p.OutputMax, p.RPS = 48, 160, 8, 48, 4, 16, 24
	}},
	{"system_prompts", false, 32, func(p *workload.Params) {
		p.Requests, p.PrefixLen, p.SuffixMin, p.SuffixMax, p.OutputMin, p.OutputMax, p.RPS = 96, 96, 4, 24, 2, 8, 32
	}},
	{"multi_turn", false, 24, func(p *workload.Params) {
		p.Conversations, p.Turns, p.PrefixLen, p.SuffixMin, p.SuffixMax, p.OutputMin, p.OutputMax = 8, 4, 48, 8, 24, 4, 12
		p.RPS, p.Think = 16, 100*time.Millisecond
	}},
	{"routing", false, 24, func(p *workload.Params) {
		p.Conversations, p.Turns, p.PrefixLen, p.SuffixMin, p.SuffixMax, p.OutputMin, p.OutputMax = 8, 4, 64, 8, 24, 4, 12
		p.RPS, p.Think = 16, 100*time.Millisecond
	}},
}

// traceSalt spreads a salted workload's requests over no salt and two
// tenants.
func traceSalt(id int) string { return []string{"", "tenant-a", "tenant-b"}[id%3] }

// driven adapts the engine to the workload driver: every request
// generates its max_tokens, under its salt when the workload is salted.
type driven struct {
	e      *engine.Engine
	salted bool
}

func (d driven) Submit(id int, prompt []int32, maxTokens int) error {
	r := engine.Request{ID: id, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true}
	if d.salted {
		r.CacheSalt = traceSalt(id)
	}
	return d.e.Submit(r)
}

func (d driven) Step() []workload.Token {
	var out []workload.Token
	for _, o := range d.e.Step() {
		out = append(out, workload.Token{ID: o.ID, Token: o.Token, Done: o.Done, Err: o.Err})
	}
	return out
}

func (d driven) Busy() bool { return d.e.Busy() }

// traceRun is what one replay of a trace produced.
type traceRun struct {
	outputs [][]int32
	stats   engine.Stats
	events  []MatchEvent // every Match, in order (with a Tap)
	report  Report       // the Tap's (with one)
}

// replay serves workload w through an engine whose prefix cache build
// makes, with every ghost around it when tap is set, on a step clock that
// the priority ghost's durations run on too.
func replay(t *testing.T, m *model.Model, w int, build Builder, tap bool) traceRun {
	t.Helper()
	tw := traceWorkloads[w]
	p := workload.DefaultParams(tw.name)
	p.Vocab = m.Config.VocabSize
	tw.params(&p)
	reqs, err := workload.Generate(tw.name, p)
	require.NoError(t, err)
	clock := workload.NewStepClock(20 * time.Millisecond)
	var run traceRun
	var board *Board
	cfg := engine.DefaultConfig()
	cfg.NumBlocks, cfg.MaxBatchTokens, cfg.Audit = tw.blocks, 96, true
	cfg.PrefixCache = build
	if tap {
		cfg.PrefixCache, board = Wrap(build, Config{
			Policies: Standard(traceRetention),
			Now:      clock.Now,
			OnMatch: func(ev MatchEvent) {
				ev.Ghosts = append([]int(nil), ev.Ghosts...)
				run.events = append(run.events, ev)
			},
		})
	}
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()
	res, err := workload.Run(driven{e, tw.salted}, reqs, workload.RunOptions{Name: tw.name, Clock: clock})
	require.NoError(t, err)
	for _, r := range res.Requests {
		require.Empty(t, r.Err, "request %d", r.ID)
		run.outputs = append(run.outputs, r.Output)
	}
	run.stats = e.Stats()
	if board != nil {
		run.report = board.Report()
	}
	return run
}

// traceRetention keeps tenant-a's first 64 prompt tokens at priority 80
// for a second of idleness, and every request's generated blocks at 10.
func traceRetention(salt string, _ []int32) Retention {
	r := Retention{Decode: &Level{Priority: 10}}
	if salt == "tenant-a" {
		r.Ranges = []TokenRange{{Start: 0, End: 64, Priority: 80, For: time.Second}}
	}
	return r
}

// TestGhostLRUIsTheRadixTreeOnEngineTraces replays each recorded trace
// through a real engine twice, once on a radix tree and once on a radix
// tree in a Tap with every ghost, and checks that the Tap changes nothing
// (every request's tokens and every engine counter are the same) and that
// the LRU ghost found exactly what the tree found, Match by Match, and
// evicted as many blocks. Run with -v for each trace's table.
func TestGhostLRUIsTheRadixTreeOnEngineTraces(t *testing.T) {
	m := modeltest.Load(t, model.ArchLlama, 1)
	for w, tw := range traceWorkloads {
		t.Run(tw.name, func(t *testing.T) {
			plain := replay(t, m, w, radix.PrefixCache, false)
			run := replay(t, m, w, radix.PrefixCache, true)
			require.Equal(t, plain.outputs, run.outputs, "the Tap changed what the engine generated")
			require.Equal(t, plain.stats, run.stats, "the Tap changed what the engine did")
			lru := run.report.Rows[1]
			require.Equal(t, "LRU", lru.Name)
			for i, ev := range run.events {
				require.Equal(t, ev.Real, ev.Ghosts[0], "Match %d (sequence %d, %d tokens, salt %q): the tree found %d, the LRU ghost %d",
					i, ev.Seq, ev.Tokens, ev.Salt, ev.Real, ev.Ghosts[0])
			}
			real := run.report.Rows[0]
			require.Equal(t, int64(run.stats.MatchedTokens), real.Hits, "the Tap's count of the real hits")
			require.Equal(t, real.Hits, lru.Hits)
			require.Equal(t, real.Evicted, lru.Evicted)
			require.Equal(t, real.Cached, lru.Cached)
			require.Greater(t, real.Evicted, int64(50), "the pool is not under pressure")
			t.Logf("%s on the radix tree:\n%s", tw.name, run.report.Table())
		})
	}
}

// TestGhostLRUAgainstTheOtherDesigns replays the traces on the hash index
// and the compressed trie, each in a Tap, checks that the Tap changes
// nothing there either, and logs how far the LRU ghost (the radix tree's
// LRU) is from each design's own eviction (-v). They differ, and by
// design: the hash index queues a block when it finds it reclaimable, in
// the order of last use, may evict any such block (not only leaves) and
// never a block a sequence still holds; the trie evicts from compressed
// leaves, by its LRU of last Match or Insert, part of a leaf at a time.
func TestGhostLRUAgainstTheOtherDesigns(t *testing.T) {
	m := modeltest.Load(t, model.ArchLlama, 1)
	for _, d := range []struct {
		name  string
		build Builder
	}{{"hash index", blockhash.PrefixCache}, {"compressed trie", trie.PrefixCache}} {
		for w, tw := range traceWorkloads {
			t.Run(fmt.Sprintf("%s/%s", d.name, tw.name), func(t *testing.T) {
				plain := replay(t, m, w, d.build, false)
				run := replay(t, m, w, d.build, true)
				require.Equal(t, plain.outputs, run.outputs, "the Tap changed what the engine generated")
				require.Equal(t, plain.stats, run.stats, "the Tap changed what the engine did")
				differ := 0
				for _, ev := range run.events {
					if ev.Ghosts[0] != ev.Real {
						differ++
					}
				}
				t.Logf("%s on the %s: the LRU ghost differs from it on %d of %d Matches\n%s",
					tw.name, d.name, differ, len(run.events), run.report.Table())
			})
		}
	}
}
