package radix

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
)

// FuzzPool drives the tree through a small pool the way the engine does
// (cachetest.Ops): admissions, prefill chunks each followed by a commit,
// decode steps, finishes and evictions over a three-token alphabet, with
// the pool's audit and cachetest.Watch's invariants checked throughout.
func FuzzPool(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cachetest.Ops(t, New, data)
	})
}
