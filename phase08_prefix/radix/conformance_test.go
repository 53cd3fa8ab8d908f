package radix_test

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestConformance runs the suite every prefix cache must pass: audit after
// every operation, and the contents of every lent block checked against
// what computing the prompt would have written.
func TestConformance(t *testing.T) {
	cachetest.Run(t, radix.New)
	// Once more without the tree's own audit, so that bookkeeping the
	// audit brings up to date is not settled for the operations that follow.
	t.Run("without AuditCache", func(t *testing.T) { cachetest.RunWithoutCacheAudit(t, radix.New) })
	// With an edge hash under which nearly every key collides, a lookup
	// that trusted a hash hit without comparing the block's tokens would
	// lend another prefix's KV, which the suite's KV check catches.
	t.Run("colliding edge hash", func(t *testing.T) { cachetest.Run(t, radix.NewWeakHashTree) })
}
