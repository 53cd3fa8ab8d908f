package cpu

import (
	"math"
	"slices"
	"sync/atomic"
)

// ropeTable holds the cos and sin of every angle of a RoPE call: for row
// r, at position pos[r], cs[r*2h:][:h] are cos(pos[r]·invFreq[i]) and
// cs[r*2h+h:][:h] the sins, h = len(invFreq). It is filled once (fill, by
// row ranges in parallel) before it is shared, and never changed after.
type ropeTable struct {
	pos     []int32
	invFreq []float32
	cs      []float32
}

// newRopeTable returns an unfilled table for pos and invFreq (copied, so
// that the caller may reuse its slices).
func newRopeTable(pos []int32, invFreq []float32) *ropeTable {
	return &ropeTable{pos: slices.Clone(pos), invFreq: slices.Clone(invFreq), cs: make([]float32, 2*len(invFreq)*len(pos))}
}

// fill computes rows [r0, r1) of the table: the angle pos·invFreq[i]
// rounded to float32, as HuggingFace computes it, then its cos and sin in
// float64, rounded.
func (t *ropeTable) fill(r0, r1 int) {
	h := len(t.invFreq)
	for r := r0; r < r1; r++ {
		cs := t.row(r)
		for i, f := range t.invFreq {
			sn, cn := math.Sincos(float64(float32(t.pos[r]) * f))
			cs[i], cs[h+i] = float32(cn), float32(sn)
		}
	}
}

// row returns row r's cos and sin.
func (t *ropeTable) row(r int) []float32 {
	n := 2 * len(t.invFreq)
	return t.cs[r*n : (r+1)*n]
}

// matches reports whether t holds the angles of pos and invFreq.
func (t *ropeTable) matches(pos []int32, invFreq []float32) bool {
	return slices.Equal(t.pos, pos) && slices.Equal(t.invFreq, invFreq)
}

// ropeTables keeps the two tables used last: q and k of every layer share
// one, and Gemma-3's local and global layers, of two frequency sets, one
// each. Tables are immutable once published, so a caller that finds one
// may use it while another call replaces it.
type ropeTables struct {
	last [2]atomic.Pointer[ropeTable]
}

// find returns a kept table for pos and invFreq, or nil.
func (ts *ropeTables) find(pos []int32, invFreq []float32) *ropeTable {
	for i := range ts.last {
		if t := ts.last[i].Load(); t != nil && t.matches(pos, invFreq) {
			return t
		}
	}
	return nil
}

// add keeps t as the newest table, dropping the older of the two.
func (ts *ropeTables) add(t *ropeTable) {
	ts.last[1].Store(ts.last[0].Load())
	ts.last[0].Store(t)
}
