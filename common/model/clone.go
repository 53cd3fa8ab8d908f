package model

// Clone returns a second forward context over m's weights: the same
// tensors (nothing is copied), its own scratch activations. Forward writes
// the model's scratch, so one Model must not run two forwards at once; two
// clones may, on a backend that goroutines may share (the CPU backend, and
// the CUDA one, which serialises its calls). A background job that
// recomputes KV while the engine steps (engine's hit verifier) forwards
// through a clone. Close the clone with CloseScratch, never Close: the
// weights still belong to m.
func (m *Model) Clone() *Model {
	c := *m
	c.scr = scratch{}
	return &c
}

// CloseScratch frees the scratch activations of a clone (see Clone),
// leaving the shared weights alone.
func (m *Model) CloseScratch() { m.scr.free(m.be) }
