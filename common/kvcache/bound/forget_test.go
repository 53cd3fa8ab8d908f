package bound_test

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/bound"
	"kvlab/common/kvcache/cachetest"
)

// TestRecordedCachesPassTheConformanceSuite runs the suite, its Forget
// checks included, through a recorder around each design: recording
// changes nothing the pool sees, and Forget reaches the design.
func TestRecordedCachesPassTheConformanceSuite(t *testing.T) {
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			cachetest.Run(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
				return bound.NewRecorder().Wrap(d.f)(a, bs)
			})
		})
	}
}
