package kvcache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTailHashCollisionIsAMiss forges a collision: prefix b's key names
// the tail kept after prefix a. A lookup compares the prefix it kept, so b
// finds nothing rather than a's KV.
func TestTailHashCollisionIsAMiss(t *testing.T) {
	s := newTailStore(4)
	a, b := []int32{1, 2, 3, 4}, []int32{5, 6, 7, 8}
	require.Empty(t, s.put("", a, []int32{9, 9}, 7))
	s.byKey[s.key("", b)] = s.byKey[s.key("", a)]
	n, el := s.shared("", b, []int32{9, 9})
	require.Zero(t, n)
	require.Nil(t, el)
	n, _ = s.shared("", a, []int32{9, 8})
	require.Equal(t, 1, n)
}

// TestTailStoreReplacesAndBounds: one tail per prefix (the newest), and
// the least recently used out past the bound; put hands back each block
// whose reference the store let go of.
func TestTailStoreReplacesAndBounds(t *testing.T) {
	s := newTailStore(2)
	require.Empty(t, s.put("", []int32{1}, []int32{1}, 10))
	require.Equal(t, []int32{10}, s.put("", []int32{1}, []int32{2}, 11), "the newer tail of a prefix replaces the older")
	require.Empty(t, s.put("", []int32{2}, []int32{1}, 12))
	require.Equal(t, []int32{11}, s.put("x", []int32{2}, []int32{1}, 13), "another salt is another key; over the bound, the oldest goes")
	require.Equal(t, map[int32]int{12: 1, 13: 1}, s.holds())
	s.lru.MoveToFront(s.find("", []int32{2})) // as a hit does
	require.Equal(t, []int32{13}, s.put("", []int32{3}, []int32{1}, 14), "the least recently used goes")
}
