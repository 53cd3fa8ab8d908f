package kvcache_test

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestShareCappedDescribes runs the view checks on every design behind the
// cap: one view over the salts' parts, each node under its own salt, its
// EvictRank the order the cap's Evict takes the parts' nodes in.
func TestShareCappedDescribes(t *testing.T) {
	for _, d := range shareDesigns {
		t.Run(d.name, func(t *testing.T) {
			if d.name == "trie" {
				// A trie node leaves a block at a time, and the merged
				// ranks count it gone at its first (TryDescribe).
				cachetest.DescribeIsWellFormed(t, d.f)
				return
			}
			cachetest.DescribeIsConsistent(t, d.f)
		})
	}
}

// TestShareCappedDoesNotDescribeWhatCannot: behind the cap, a design that
// is no Describer is reported as such, with or without parts.
func TestShareCappedDoesNotDescribeWhatCannot(t *testing.T) {
	hide := func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return struct{ kvcache.PrefixCache }{radix.New(a, bs)}
	}
	h := cachetest.NewHarness(t, kvcache.ShareCapped(hide, 0.5), 8, 2)
	if _, ok := kvcache.DescribeCache(h.Cache, 0); ok {
		t.Fatal("DescribeCache of an empty share of a cache that is no Describer: ok")
	}
	h.StartSalted(1, "a", cachetest.Tokens(0, 4))
	h.Finish(1)
	if _, ok := kvcache.DescribeCache(h.Cache, 0); ok {
		t.Fatal("DescribeCache of a share of a cache that is no Describer: ok")
	}
	h = cachetest.NewHarness(t, kvcache.ShareCapped(radix.New, 0.5), 8, 2)
	if v, ok := kvcache.DescribeCache(h.Cache, 0); !ok || v.Design != "radix" || len(v.Nodes) != 0 {
		t.Fatalf("DescribeCache of an empty share of radix trees: %+v, %v; want an empty radix view", v, ok)
	}
}

// sameIDs is a design whose every view has the same two IDs, as a design
// that numbered its nodes from 0 would.
type sameIDs struct{ kvcache.PrefixCache }

func (sameIDs) Describe(int) kvcache.View {
	return kvcache.View{Design: "same", BlockSize: 2, Nodes: []kvcache.ViewNode{
		{ID: 0, Parent: -1, Tokens: []int32{1, 2}, Blocks: []int32{0}, Refs: []int{1}, EvictRank: -1},
		{ID: 1, Parent: 0, Tokens: []int32{3, 4}, Blocks: []int32{1}, Refs: []int{1}, EvictRank: -1},
	}}
}

// TestShareCappedRenumbersCollidingIDs: when two parts use the same IDs,
// the merged view numbers nodes by position and keeps each parent link
// inside its part.
func TestShareCappedRenumbersCollidingIDs(t *testing.T) {
	f := kvcache.ShareCapped(func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return sameIDs{radix.New(a, bs)} }, 0.5)
	h := cachetest.NewHarness(t, f, 16, 2)
	h.StartSalted(1, "a", cachetest.Tokens(0, 4))
	h.Finish(1)
	h.StartSalted(2, "b", cachetest.Tokens(0, 4))
	h.Finish(2)
	v, ok := kvcache.DescribeCache(h.Cache, 0)
	if !ok || len(v.Nodes) != 4 {
		t.Fatalf("view %+v, %v; want four nodes", v, ok)
	}
	want := []struct {
		id, parent int
		salt       string
	}{{0, -1, "a"}, {1, 0, "a"}, {2, -1, "b"}, {3, 2, "b"}}
	for i, n := range v.Nodes {
		if n.ID != want[i].id || n.Parent != want[i].parent || n.Salt != want[i].salt {
			t.Fatalf("node %d: ID %d parent %d salt %q; want %d %d %q", i, n.ID, n.Parent, n.Salt, want[i].id, want[i].parent, want[i].salt)
		}
	}
}
