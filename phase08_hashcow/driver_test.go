package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/kernels"
)

// forkDriver generates n samples of one prompt straight on a KV pool and
// the model, the way the engine does for a Request with N samples: prefill
// the prompt once as sequence 0, commit it to the prefix cache, fork
// sequences 1..n-1 off it, then decode every sample in one forward per
// step. Sample i samples with seed Seed+i.
//
// It exists to run the bugs the engine does not have: the two switches
// below break copy-on-write in the two ways PITFALLS.md describes.
type forkDriver struct {
	m    *model.Model
	pool *kvcache.Pool
	// noCopy writes into blocks without PrepareWrite: a shared block is
	// written in place, under every sample that holds it.
	noCopy bool
	// waitForCopies holds back, for a step, a sample whose write needs a
	// copy the pool cannot supply now. Without it the shortage shows up
	// only at write time, as PrepareWrite's error.
	waitForCopies bool
}

func newForkDriver(t testing.TB, m *model.Model, blocks, blockSize int, cache func(*kvcache.Allocator, int) kvcache.PrefixCache) *forkDriver {
	t.Helper()
	c := m.Config
	p, err := kvcache.NewPool(m.Backend(), kvcache.Config{
		Layers: c.NumHiddenLayers, KVDim: c.KVDim(), Blocks: blocks, BlockSize: blockSize, NewCache: cache,
	})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &forkDriver{m: m, pool: p}
}

// run returns each sample's maxTokens tokens, and the logits each token
// was sampled from.
func (d *forkDriver) run(prompt []int32, n, maxTokens int, s engine.Sampling) (tokens [][]int32, logits [][][]float32, err error) {
	p := d.pool
	cached, err := p.Open(0, "", prompt)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for i := range n {
			p.Release(i)
		}
	}()
	if err := p.Grow(0, len(prompt)); err != nil {
		return nil, nil, err
	}
	// Prefill from the first uncached token; a prompt found whole in the
	// cache still runs its last token, for the logits, without writing its
	// KV into the shared block (slot -1).
	start := min(cached, len(prompt)-1)
	st := &model.Step{Tokens: prompt[start:]}
	for pos := start; pos < len(prompt); pos++ {
		st.Pos = append(st.Pos, int32(pos))
		if pos < cached {
			st.Slots = append(st.Slots, -1)
		} else {
			st.Slots = p.Slots(st.Slots, 0, pos, 1)
		}
	}
	if err := d.prepare(0, max(start, cached), len(prompt)-max(start, cached)); err != nil {
		return nil, nil, err
	}
	st.Seqs = []kernels.AttnSeq{{QStart: 0, QLen: len(st.Tokens), CtxLen: len(prompt), Pages: p.Pages(0)}}
	st.LogitRows = []int32{int32(len(st.Tokens) - 1)}
	rows := d.logits(st)
	p.Commit(0, prompt)

	out, outLogits := make([][]int32, n), make([][][]float32, n)
	sampling := make([]engine.Sampling, n)
	for i := range n {
		if i > 0 {
			if err := p.Fork(0, i); err != nil {
				return nil, nil, err
			}
		}
		sampling[i] = s
		sampling[i].Seed += uint64(i)
		out[i] = []int32{sampling[i].Sample(rows[0], 0)}
		outLogits[i] = [][]float32{rows[0]}
	}

	for {
		st := &model.Step{}
		var who []int
		for i := range n {
			pos := len(prompt) + len(out[i]) - 1 // where the newest token goes
			if len(out[i]) == maxTokens {
				continue
			}
			if err := p.Grow(i, pos+1); err != nil {
				return nil, nil, err
			}
			if d.waitForCopies && d.copyNeeded(i, pos) && p.FreeTokens() == 0 {
				continue // another sample will finish and give blocks back
			}
			if err := d.prepare(i, pos, 1); err != nil {
				return nil, nil, err
			}
			st.Tokens = append(st.Tokens, out[i][len(out[i])-1])
			st.Pos = append(st.Pos, int32(pos))
			st.Slots = p.Slots(st.Slots, i, pos, 1)
			st.Seqs = append(st.Seqs, kernels.AttnSeq{QStart: len(who), QLen: 1, CtxLen: pos + 1, Pages: p.Pages(i)})
			st.LogitRows = append(st.LogitRows, int32(len(who)))
			who = append(who, i)
		}
		if len(who) == 0 {
			break
		}
		for j, row := range d.logits(st) {
			i := who[j]
			out[i] = append(out[i], sampling[i].Sample(row, len(out[i])))
			outLogits[i] = append(outLogits[i], row)
			if len(out[i]) == maxTokens {
				p.Commit(i, join(prompt, out[i][:len(out[i])-1]))
				p.Release(i)
			}
		}
		if err := p.Audit().Err(); err != nil {
			return nil, nil, err
		}
	}
	for i := range n {
		if len(out[i]) < maxTokens {
			return nil, nil, fmt.Errorf("sample %d stalled after %d tokens", i, len(out[i]))
		}
	}
	return out, outLogits, nil
}

// prepare makes positions [from, from+n) of sequence id writable.
func (d *forkDriver) prepare(id, from, n int) error {
	if d.noCopy {
		return nil
	}
	return d.pool.PrepareWrite(id, from, n)
}

// copyNeeded reports whether writing position pos of sequence id copies
// its block first.
func (d *forkDriver) copyNeeded(id, pos int) bool {
	b := d.pool.Pages(id)[pos/d.pool.BlockSize()]
	return d.pool.Allocator().Refs(b) > 1
}

// logits runs st and returns one host row per logit row.
func (d *forkDriver) logits(st *model.Step) [][]float32 {
	t := d.m.Forward(st, d.pool)
	host := d.m.Backend().ToHost(t, make([]float32, t.Rows()*t.Cols()))
	rows := make([][]float32, t.Rows())
	for i := range rows {
		rows[i] = host[i*t.Cols() : (i+1)*t.Cols()]
	}
	return rows
}

// isOutOfBlocks reports whether err is the pool running dry.
func isOutOfBlocks(err error) bool {
	var oob *kvcache.OutOfBlocksError
	return errors.As(err, &oob)
}
