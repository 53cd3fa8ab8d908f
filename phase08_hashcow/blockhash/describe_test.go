package blockhash

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// TestDescribeIsConsistent checks the index's View against the index: its
// blocks against MatchLen, Stats and the allocator, Describe against the
// same workload run without it (Describe must not settle), and EvictRank
// against Evict itself, with the default hash, vLLM's and one under which
// keys collide.
func TestDescribeIsConsistent(t *testing.T) {
	for name, opts := range map[string][]Option{
		"default": nil,
		"vllm":    {WithVLLMHash("describe")},
		"weak":    {WithHash(func(parent uint64, block []int32) uint64 { return parent ^ uint64(block[0]&3) })},
	} {
		t.Run(name, func(t *testing.T) {
			cachetest.DescribeIsConsistent(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return New(a, bs, opts...) })
		})
	}
}
