package trie

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// factory builds the trie the way the runnable does, for one policy.
func factory(p Policy) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return New(a, bs, p) }
}

// policies names every Policy the package offers, for table-driven tests.
var policies = []struct {
	name   string
	policy Policy
}{
	{"deepest-first", DeepestFirst},
	{"lru", LRU},
	{"priority", Priority},
	{"size-aware", SizeAware},
}

func TestConformance(t *testing.T) {
	for _, tc := range policies {
		t.Run(tc.name, func(t *testing.T) { cachetest.Run(t, factory(tc.policy)) })
		// Once more without the trie's own audit, which re-measures pinned
		// nodes first and would hide a method that forgot to.
		t.Run(tc.name+" without AuditCache", func(t *testing.T) { cachetest.RunWithoutCacheAudit(t, factory(tc.policy)) })
	}
}
