package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// pagedKV is a minimal paged KV pool for tests: one K and one V tensor per
// layer, handed out block by block in a scrambled order so that a forward
// which assumed contiguous pages would read the wrong rows.
type pagedKV struct {
	k, v []kernels.Tensor
	bs   int
	free []int32
}

func newPagedKV(m *Model, blocks, bs int) *pagedKV {
	kv := &pagedKV{bs: bs}
	for range m.Config.NumHiddenLayers {
		kv.k = append(kv.k, m.be.New(blocks*bs, m.Config.KVDim()))
		kv.v = append(kv.v, m.be.New(blocks*bs, m.Config.KVDim()))
	}
	for b := range blocks {
		kv.free = append(kv.free, int32((b*7)%blocks)) // 7 is coprime with the block counts used
	}
	return kv
}

func (kv *pagedKV) Layer(l int) (kernels.Tensor, kernels.Tensor) { return kv.k[l], kv.v[l] }
func (kv *pagedKV) BlockSize() int                               { return kv.bs }

// seqState is one sequence being fed through the model.
type seqState struct {
	tokens []int32 // the whole prompt
	done   int     // tokens already in the cache
	pages  []int32
}

// slot returns the KV slot of position p, taking a new block when needed.
func (kv *pagedKV) slot(s *seqState, p int) int32 {
	for p/kv.bs >= len(s.pages) {
		s.pages = append(s.pages, kv.free[0])
		kv.free = kv.free[1:]
	}
	return s.pages[p/kv.bs]*int32(kv.bs) + int32(p%kv.bs)
}

// logitsOf copies row r of a logits tensor to the host.
func logitsOf(be kernels.Backend, t kernels.Tensor) [][]float32 {
	all := be.ToHost(t, make([]float32, t.Rows()*t.Cols()))
	out := make([][]float32, t.Rows())
	for r := range out {
		out[r] = all[r*t.Cols() : (r+1)*t.Cols()]
	}
	return out
}

// lastLogitsLocal runs every prompt as one Local prefill step (no cache when
// kv is nil) and returns each prompt's last-position logits.
func lastLogitsLocal(m *Model, prompts [][]int32, kv *pagedKV) [][]float32 {
	s := &Step{Local: true}
	var states []*seqState
	for _, p := range prompts {
		st := &seqState{tokens: p}
		states = append(states, st)
		start := len(s.Tokens)
		for i, tok := range p {
			s.Tokens = append(s.Tokens, tok)
			s.Pos = append(s.Pos, int32(i))
			if kv != nil {
				s.Slots = append(s.Slots, kv.slot(st, i))
			}
		}
		s.Seqs = append(s.Seqs, kernels.AttnSeq{QStart: start, QLen: len(p), CtxLen: len(p), Pages: st.pages})
		s.LogitRows = append(s.LogitRows, int32(len(s.Tokens)-1))
	}
	var k KV
	if kv != nil {
		k = kv
	}
	return logitsOf(m.be, m.Forward(s, k))
}

// lastLogitsChunked feeds all prompts through the paged cache together, at
// most chunk[i] tokens of prompt i per step, so steps mix sequences at
// different stages (a chunk of 1 is a decode). It returns each prompt's
// last-position logits.
func lastLogitsChunked(m *Model, prompts [][]int32, chunk []int, kv *pagedKV) [][]float32 {
	states := make([]*seqState, len(prompts))
	for i, p := range prompts {
		states[i] = &seqState{tokens: p}
	}
	out := make([][]float32, len(prompts))
	for {
		s := &Step{}
		var owners []int
		for i, st := range states {
			n := min(chunk[i], len(st.tokens)-st.done)
			if n == 0 {
				continue
			}
			start := len(s.Tokens)
			for p := st.done; p < st.done+n; p++ {
				s.Tokens = append(s.Tokens, st.tokens[p])
				s.Pos = append(s.Pos, int32(p))
				s.Slots = append(s.Slots, kv.slot(st, p))
			}
			st.done += n
			s.Seqs = append(s.Seqs, kernels.AttnSeq{QStart: start, QLen: n, CtxLen: st.done, Pages: st.pages})
			if st.done == len(st.tokens) {
				s.LogitRows = append(s.LogitRows, int32(len(s.Tokens)-1))
				owners = append(owners, i)
			}
		}
		if len(s.Tokens) == 0 {
			return out
		}
		if logits := m.Forward(s, kv); logits != nil {
			for r, row := range logitsOf(m.be, logits) {
				out[owners[r]] = row
			}
		}
	}
}

// maxRelErr is max|a-b| / max|b| over all entries: the error relative to
// the largest reference value, so tiny logits do not dominate the measure.
func maxRelErr(a, b []float32) float64 {
	var diff, scale float64
	for i := range b {
		diff = max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	return diff / scale
}

func testPrompts(vocab int, lens ...int) [][]int32 {
	var out [][]int32
	for j, n := range lens {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*37 + j*11 + 5) % vocab)
		}
		out = append(out, p)
	}
	return out
}

func loadSynth(t *testing.T, o SynthOptions) *Model {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, o))
	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

// TestForwardSchedulesAgree runs the same prompts as one local prefill, as
// mixed chunked prefills through the paged cache, and token by token, and
// checks the last-position logits agree: the cache, the page tables and the
// positions are all wired correctly only if they do.
func TestForwardSchedulesAgree(t *testing.T) {
	for _, arch := range []string{ArchLlama, ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			m := loadSynth(t, tinySynth(arch, 9))
			prompts := testPrompts(m.Config.VocabSize, 1, 7, 21)
			ref := lastLogitsLocal(m, prompts, nil)
			schedules := []struct {
				name  string
				run   func(kv *pagedKV) [][]float32
				tol   float64
				exact bool
			}{
				{"local prefill writing the cache", func(kv *pagedKV) [][]float32 { return lastLogitsLocal(m, prompts, kv) }, 0, true},
				{"mixed chunks", func(kv *pagedKV) [][]float32 { return lastLogitsChunked(m, prompts, []int{1, 3, 5}, kv) }, 1e-5, false},
				{"token by token", func(kv *pagedKV) [][]float32 { return lastLogitsChunked(m, prompts, []int{1, 1, 1}, kv) }, 1e-5, false},
			}
			for _, sc := range schedules {
				t.Run(sc.name, func(t *testing.T) {
					have := sc.run(newPagedKV(m, 16, 4))
					require.Len(t, have, len(prompts))
					for i := range prompts {
						err := maxRelErr(have[i], ref[i])
						assert.LessOrEqual(t, err, sc.tol, "prompt %d: max relative error have %g; want <= %g", i, err, sc.tol)
					}
				})
			}
		})
	}
}

// TestForwardAfterLocalPrefill decodes from a cache filled by a Local
// prefill, the engine's common path.
func TestForwardAfterLocalPrefill(t *testing.T) {
	m := loadSynth(t, tinySynth(ArchQwen3, 10))
	full := testPrompts(m.Config.VocabSize, 12)[0]
	kv := newPagedKV(m, 8, 4)
	st := &seqState{tokens: full}
	prefill := &Step{Local: true}
	for p := range 11 {
		prefill.Tokens = append(prefill.Tokens, full[p])
		prefill.Pos = append(prefill.Pos, int32(p))
		prefill.Slots = append(prefill.Slots, kv.slot(st, p))
	}
	prefill.Seqs = []kernels.AttnSeq{{QStart: 0, QLen: 11, CtxLen: 11, Pages: st.pages}}
	assert.Nil(t, m.Forward(prefill, kv), "no LogitRows, no logits")
	decode := &Step{
		Tokens: []int32{full[11]}, Pos: []int32{11}, Slots: []int32{kv.slot(st, 11)},
		Seqs:      []kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 12, Pages: st.pages}},
		LogitRows: []int32{0},
	}
	have := logitsOf(m.be, m.Forward(decode, kv))[0]
	want := lastLogitsLocal(m, [][]int32{full}, nil)[0]
	err := maxRelErr(have, want)
	assert.LessOrEqual(t, err, 1e-5, "max relative error have %g; want <= 1e-5", err)
}

// countingBackend counts tensor allocations.
type countingBackend struct {
	kernels.Backend
	news int
}

func (c *countingBackend) New(rows, cols int) kernels.Tensor {
	c.news++
	return c.Backend.New(rows, cols)
}

func TestForwardReusesScratch(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, tinySynth(ArchLlama, 11)))
	be := &countingBackend{Backend: cpu.New()}
	m, err := Load(dir, be)
	require.NoError(t, err)
	defer m.Close()
	prompts := testPrompts(m.Config.VocabSize, 9, 4)
	lastLogitsLocal(m, prompts, nil) // sizes the scratch for 13 tokens, 2 logit rows
	before := be.news
	lastLogitsLocal(m, prompts[1:], nil)
	lastLogitsChunked(m, prompts, []int{2, 2}, newPagedKV(m, 8, 4))
	assert.Equal(t, before+2*m.Config.NumHiddenLayers, be.news, "smaller steps must reuse the scratch: have %d allocations; want only the KV pool's", be.news-before)
}

// TestGreedyNotDegenerate checks the synthetic model behaves like a model:
// greedy decoding from different prompts wanders over many tokens instead
// of repeating one.
func TestGreedyNotDegenerate(t *testing.T) {
	for _, arch := range []string{ArchLlama, ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			o := DefaultSynth(arch)
			o.Layers = 2
			m := loadSynth(t, o)
			kv := newPagedKV(m, 16, 16)
			st := &seqState{tokens: []int32{1, 100, 200}}
			s := &Step{Local: true, Tokens: st.tokens, Pos: []int32{0, 1, 2}, LogitRows: []int32{2}}
			for p := range 3 {
				s.Slots = append(s.Slots, kv.slot(st, p))
			}
			s.Seqs = []kernels.AttnSeq{{QLen: 3, CtxLen: 3, Pages: st.pages}}
			distinct := map[int32]bool{}
			for p := 3; p < 40; p++ {
				logits := m.Forward(s, kv)
				for _, v := range logitsOf(m.be, logits)[0] {
					require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "non-finite logit at step %d", p)
				}
				next := m.be.ArgmaxRows(logits)[0]
				distinct[next] = true
				slot := kv.slot(st, p)
				s = &Step{Tokens: []int32{next}, Pos: []int32{int32(p)}, Slots: []int32{slot},
					Seqs: []kernels.AttnSeq{{QLen: 1, CtxLen: p + 1, Pages: st.pages}}, LogitRows: []int32{0}}
			}
			assert.GreaterOrEqual(t, len(distinct), 8, "greedy decoding produced only %d distinct tokens", len(distinct))
		})
	}
}

func TestForwardPanics(t *testing.T) {
	m := loadSynth(t, tinySynth(ArchLlama, 12))
	tests := []struct {
		name string
		step Step
		kv   KV
	}{
		{"empty", Step{Local: true}, nil},
		{"positions missing", Step{Tokens: []int32{1, 2}, Pos: []int32{0}, Local: true}, nil},
		{"slots missing", Step{Tokens: []int32{1}, Pos: []int32{0}}, newPagedKV(m, 1, 4)},
		{"cached attention without a cache", Step{Tokens: []int32{1}, Pos: []int32{0}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Panics(t, func() { m.Forward(&tt.step, tt.kv) }, fmt.Sprintf("%+v", tt.step))
		})
	}
}
