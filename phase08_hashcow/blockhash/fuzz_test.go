package blockhash_test

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
)

// FuzzPool drives the cache through a small pool the way the engine does
// (cachetest.Ops): admissions, prefill chunks each followed by a commit,
// decode steps, finishes and evictions over a three-token alphabet, with
// ownership, KV contents, the match length and the invariants of
// cachetest.Watch checked after every operation. `go test` runs the seed
// corpus; `go test -run '^$' -fuzz FuzzPool ./phase08_hashcow/blockhash/`
// explores.
func FuzzPool(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { cachetest.Ops(t, factory(), data) })
}
