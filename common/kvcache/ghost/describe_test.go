package ghost

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// TestTapDescribesTheRealCache runs the view checks on each design inside
// a Tap with every ghost: kvcache.DescribeCache reaches the real cache
// through the Tap, and the Tap's view is the design's.
func TestTapDescribesTheRealCache(t *testing.T) {
	for name, f := range map[string]cachetest.Factory{"radix": radix.New, "blockhash": blockhash.PrefixCache, "trie": trie.PrefixCache} {
		t.Run(name, func(t *testing.T) { cachetest.DescribeIsConsistent(t, tapped(f)) })
	}
}

// TestTapDoesNotDescribeWhatCannot: around a cache that is no Describer,
// the Tap reports that it cannot describe it rather than show an empty
// cache.
func TestTapDoesNotDescribeWhatCannot(t *testing.T) {
	a := kvcache.NewAllocator(8)
	hidden := struct{ kvcache.PrefixCache }{radix.New(a, 2)}
	tap := NewTap(hidden, 2, a.Total(), Config{})
	if _, ok := kvcache.DescribeCache(tap, 0); ok {
		t.Fatal("DescribeCache of a Tap around a cache that is no Describer: ok")
	}
	if _, ok := kvcache.DescribeCache(NewTap(radix.New(a, 2), 2, a.Total(), Config{}), 0); !ok {
		t.Fatal("DescribeCache of a Tap around a radix tree: not ok")
	}
}
