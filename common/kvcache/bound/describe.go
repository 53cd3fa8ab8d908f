package bound

import "kvlab/common/kvcache"

// TryDescribe describes the wrapped cache, when it can
// (kvcache.DescribeForwarder): recording changes nothing the cache holds.
// ok is false when the wrapped cache does not describe itself.
func (c *recorded) TryDescribe(max int) (kvcache.View, bool) {
	return kvcache.DescribeCache(c.inner, max)
}

var _ kvcache.DescribeForwarder = (*recorded)(nil)
