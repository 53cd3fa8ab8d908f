package blockhash_test

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/common/kvevents"
	"kvlab/phase08_hashcow/blockhash"
)

// FuzzPool drives the cache through a small pool the way the engine does
// (cachetest.Ops): admissions, prefill chunks each followed by a commit,
// decode steps, finishes and evictions over a three-token alphabet, with
// ownership, KV contents, the match length and the invariants of
// cachetest.Watch checked after every operation. `go test` runs the seed
// corpus; `go test -run '^$' -fuzz FuzzPool ./phase08_hashcow/blockhash/`
// explores. Every input runs twice: with the default hash and with vLLM's
// (WithVLLMHash).
func FuzzPool(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	factories := []cachetest.Factory{factory(), factory(blockhash.WithVLLMHash(kvevents.DefaultHashSeed))}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fac := range factories {
			cachetest.Ops(t, fac, data)
		}
	})
}
