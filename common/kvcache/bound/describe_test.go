package bound_test

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/bound"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestRecorderDescribesTheWrappedCache runs the view checks on each design
// inside a Recorder: kvcache.DescribeCache reaches the design through it.
func TestRecorderDescribesTheWrappedCache(t *testing.T) {
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) { cachetest.DescribeIsConsistent(t, bound.NewRecorder().Wrap(d.f)) })
	}
}

// TestRecorderDoesNotDescribeWhatCannot: around a cache that is no
// Describer, the Recorder reports that it cannot describe it.
func TestRecorderDoesNotDescribeWhatCannot(t *testing.T) {
	hide := func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return struct{ kvcache.PrefixCache }{radix.New(a, bs)}
	}
	a := kvcache.NewAllocator(8)
	if _, ok := kvcache.DescribeCache(bound.NewRecorder().Wrap(hide)(a, 2), 0); ok {
		t.Fatal("DescribeCache of a Recorder around a cache that is no Describer: ok")
	}
	if _, ok := kvcache.DescribeCache(bound.NewRecorder().Wrap(radix.New)(a, 2), 0); !ok {
		t.Fatal("DescribeCache of a Recorder around a radix tree: not ok")
	}
}
