package radix_test

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestDescribeIsConsistent checks the tree's View against the tree: its
// nodes against MatchLen, Stats and the allocator, Describe against the
// same workload run without it, and EvictRank against Evict itself.
func TestDescribeIsConsistent(t *testing.T) {
	cachetest.DescribeIsConsistent(t, radix.New)
}
