package ghost

import "kvlab/common/kvcache"

// TryDescribe describes the real cache, when it can
// (kvcache.DescribeForwarder): the ghosts hold no blocks, so the pool's
// structure is the real cache's alone. ok is false when the real cache
// does not describe itself.
func (t *Tap) TryDescribe(max int) (kvcache.View, bool) { return kvcache.DescribeCache(t.real, max) }

var _ kvcache.DescribeForwarder = (*Tap)(nil)
