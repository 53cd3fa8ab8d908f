package bound

import "kvlab/common/kvcache"

// Forget forgets the prefix in the wrapped cache, if it forgets
// (kvcache.Forgetter). The trace records nothing: the bound asks what a
// cache could have reused, and forgetting is not a lookup or a commit.
func (c *recorded) Forget(salt string, tokens []int32) int {
	if f, ok := c.inner.(kvcache.Forgetter); ok {
		return f.Forget(salt, tokens)
	}
	return 0
}
