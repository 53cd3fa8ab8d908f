package blockhash_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/cespare/xxhash/v2"

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

func TestChainedKeysTellPrefixesApart(t *testing.T) {
	// The same block after two different first blocks must get two keys:
	// it is the same tokens, but not the same KV.
	first, other, shared := []int32{1, 2}, []int32{3, 4}, []int32{5, 6}
	for _, tc := range []struct {
		name string
		hash blockhash.HashFunc
	}{{"fnv1a", blockhash.FNV1a}, {"xxhash", blockhash.XXHash}} {
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
