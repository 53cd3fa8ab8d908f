package engine

import (
	"kvlab/common/model"
	"kvlab/kernels"
)

// windowsOf returns each layer's sliding window when on (nil when off).
func windowsOf(mc *model.Config, on bool) []int {
	if !on {
		return nil
	}
	w := make([]int, mc.NumHiddenLayers)
	for l := range w {
		w[l] = mc.LayerWindow(l)
	}
	return w
}

// localBlocks returns the size of the local layers' storage the pool gets:
// 0 (no storage of their own) unless WindowFree.
func localBlocks(c Config) int {
	switch {
	case !c.WindowFree:
		return 0
	case c.LocalBlocks > 0:
		return c.LocalBlocks
	}
	return c.NumBlocks
}

// addLocal appends to the step the local layers' slots and page table for
// w, when the pool gives back out-of-window blocks: the same positions as
// Slots and Seqs, in the local layers' own storage.
func (e *Engine) addLocal(st *model.Step, w work, skip int) {
	if !e.pool.WindowFree() {
		return
	}
	s := w.s
	for range skip {
		st.LocalSlots = append(st.LocalSlots, -1)
	}
	st.LocalSlots = e.pool.LocalSlots(st.LocalSlots, s.key, s.computed+skip, w.n-skip)
	seq := st.Seqs[len(st.Seqs)-1]
	seq.Pages = e.pool.LocalPages(s.key)
	if st.LocalSeqs == nil {
		st.LocalSeqs = make([]kernels.AttnSeq, 0, 8)
	}
	st.LocalSeqs = append(st.LocalSeqs, seq)
}
