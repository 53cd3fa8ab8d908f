package kvcache

// OnEvict makes the pool tell fn the blocks each eviction freed, right
// after the prefix cache let them go and before any is handed out again,
// so a caller that remembers what a block held (the engine's miss ledger)
// can say which prefix left and when. fn runs on the goroutine that drives
// the pool; the slice is the pool's own, valid only during the call. nil
// turns it off.
func (p *Pool) OnEvict(fn func(blocks []int32)) { p.onEvict = fn }
