package trie

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
)

// TestDescribeIsConsistent checks the trie's View against the trie, under
// each policy: its nodes against MatchLen, Stats and the allocator,
// Describe against the same workload run without it, and EvictRank
// against Evict itself.
func TestDescribeIsConsistent(t *testing.T) {
	for _, p := range []Policy{DeepestFirst, LRU, Priority, SizeAware} {
		t.Run(PolicyName(p), func(t *testing.T) { cachetest.DescribeIsConsistent(t, WithPolicy(p)) })
	}
}

// TestPolicyNameNamesEachPolicy keeps the names a view shows distinct.
func TestPolicyNameNamesEachPolicy(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range []Policy{DeepestFirst, LRU, Priority, SizeAware, nil} {
		name := PolicyName(p)
		if seen[name] {
			t.Fatalf("PolicyName gives %q twice", name)
		}
		seen[name] = true
	}
}
