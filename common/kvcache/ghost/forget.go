package ghost

import "kvlab/common/kvcache"

// Forget forgets the prefix in the real cache, if it forgets
// (kvcache.Forgetter). The ghosts keep it: they simulate what other
// policies would have cached, and a block the real cache dropped because
// its KV went bad says nothing about their capacity.
func (t *Tap) Forget(salt string, tokens []int32) int {
	if f, ok := t.real.(kvcache.Forgetter); ok {
		return f.Forget(salt, tokens)
	}
	return 0
}
