package radix

import "kvlab/common/kvcache"

// NewWeakHashTree is NewTree with an edge hash under which nearly every key
// collides, for the tests that prove lookups compare keys.
func NewWeakHashTree(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	t := NewTree(a, blockSize)
	t.weakHash = true
	return t
}
