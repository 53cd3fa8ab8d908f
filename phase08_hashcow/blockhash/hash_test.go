package blockhash_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_hashcow/blockhash"
)

func littleEndian(tokens []int32) []byte {
	b := make([]byte, 0, 4*len(tokens))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

func TestFNV1aChainIsTheHashOfTheWholePrefix(t *testing.T) {
	prefix := []int32{7, -1, 1 << 30, 0, 513, 42, 9, 9, 100000, 3}
	want := fnv.New64a()
	want.Write(littleEndian(prefix))
	for _, block := range []int{1, 2, 5, 10} {
		t.Run(fmt.Sprintf("block=%d", block), func(t *testing.T) {
			key := blockhash.Root
			for i := 0; i < len(prefix); i += block {
				key = blockhash.FNV1a(key, prefix[i:i+block])
			}
			if have := key; have != want.Sum64() {
				t.Fatalf("chained FNV1a: have %#x; want hash/fnv's %#x", have, want.Sum64())
			}
		})
	}
}

func TestXXHashReadsEveryTokenByte(t *testing.T) {
	// The key must change with every byte of every token, and with the
	// parent; compare against xxhash itself for the block's part.
	block := []int32{1, 2, 3, 4}
	base := blockhash.XXHash(blockhash.Root, block)
	if xxhash.Sum64(littleEndian(block)) == base {
		t.Fatalf("XXHash ignores its parent: have the block's plain hash %#x", base)
	}
	if blockhash.XXHash(blockhash.Root+1, block) == base {
		t.Fatal("XXHash: a different parent gave the same key")
	}
	for i := range block {
		for bit := range 32 {
			changed := append([]int32(nil), block...)
			changed[i] ^= 1 << bit
			if blockhash.XXHash(blockhash.Root, changed) == base {
				t.Fatalf("XXHash: flipping bit %d of token %d left the key at %#x", bit, i, base)
			}
		}
	}
}

func TestMapHashReadsEveryTokenByte(t *testing.T) {
	block := []int32{1, 2, 3, 4}
	base := blockhash.MapHash(blockhash.Root, block)
	require.Equal(t, base, blockhash.MapHash(blockhash.Root, block), "the same block and parent twice")
	require.NotEqual(t, base, blockhash.MapHash(blockhash.Root+1, block), "a different parent")
	for i := range block {
		for bit := range 32 {
			changed := append([]int32(nil), block...)
			changed[i] ^= 1 << bit
			require.NotEqual(t, base, blockhash.MapHash(blockhash.Root, changed), "bit %d of token %d flipped", bit, i)
		}
	}
}

// TestWordHashReadsEveryTokenByte flips every bit of every token, for
// blocks of even and odd lengths (whole 8-byte word pairs, a lone word, a
// lone token), and moves tokens between word pairs: each must change the
// key, as must the parent.
func TestWordHashReadsEveryTokenByte(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 16} {
		block := cachetest.Tokens(11, n)
		base := blockhash.WordHash(blockhash.Root, block)
		require.Equal(t, base, blockhash.WordHash(blockhash.Root, slices.Clone(block)), "n=%d: the same block and parent twice", n)
		require.NotEqual(t, base, blockhash.WordHash(blockhash.Root+1, block), "n=%d: a different parent", n)
		require.NotEqual(t, base, blockhash.WordHash(blockhash.Root, block[:n-1]), "n=%d: one token less", n)
		for i := range block {
			for bit := range 32 {
				changed := slices.Clone(block)
				changed[i] ^= 1 << bit
				require.NotEqual(t, base, blockhash.WordHash(blockhash.Root, changed), "n=%d: bit %d of token %d flipped", n, bit, i)
			}
		}
		if n >= 8 {
			// The first two 8-byte word pairs swapped.
			swapped := slices.Concat(block[4:8], block[:4], block[8:])
			require.NotEqual(t, base, blockhash.WordHash(blockhash.Root, swapped), "n=%d: word pairs swapped", n)
		}
	}
}

func TestXXHashKeysAreStable(t *testing.T) {
	// XXHash is the hash for keys that leave the process: the same prefix
	// must get the same key in every process, today and tomorrow. These
	// values were computed once; a change to them breaks every consumer
	// that stored a key.
	first := blockhash.XXHash(blockhash.Root, []int32{1, 2, 3, 4})
	second := blockhash.XXHash(first, []int32{5, 6, 7, 8})
	require.Equal(t, []uint64{0xfe3687ac8c0a1373, 0x4e7b67df35183acb}, []uint64{first, second})
}

func TestDefaultCacheHashFindsWhatXXHashFinds(t *testing.T) {
	// The default keys the index with MapHash; WithHash(XXHash) gives
	// stable keys. Both find the same prefixes.
	for _, tc := range []struct {
		name string
		opts []blockhash.Option
	}{{"default", nil}, {"xxhash", []blockhash.Option{blockhash.WithHash(blockhash.XXHash)}}} {
		t.Run(tc.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, factory(tc.opts...), 16, 4)
			prompt := cachetest.Tokens(7, 10)
			h.Start(1, prompt)
			h.Finish(1)
			require.Equal(t, 8, h.Pool.MatchLen("", prompt))
		})
	}
}

func TestChainedKeysTellPrefixesApart(t *testing.T) {
	// The same block after two different first blocks must get two keys:
	// it is the same tokens, but not the same KV.
	first, other, shared := []int32{1, 2}, []int32{3, 4}, []int32{5, 6}
	for _, tc := range []struct {
		name string
		hash blockhash.HashFunc
	}{{"fnv1a", blockhash.FNV1a}, {"xxhash", blockhash.XXHash}, {"maphash", blockhash.MapHash}, {"wordhash", blockhash.WordHash}} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.hash(tc.hash(blockhash.Root, first), shared)
			b := tc.hash(tc.hash(blockhash.Root, other), shared)
			if a == b {
				t.Fatalf("have equal keys %#x for [1 2 5 6] and [3 4 5 6]; want different", a)
			}
			if again := tc.hash(tc.hash(blockhash.Root, first), shared); again != a {
				t.Fatalf("have %#x then %#x for the same prefix; want a deterministic key", a, again)
			}
		})
	}
}
