package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"testing"

	"kvlab/common/cachefile"
	"kvlab/common/kvevents"
)

// fuzzFile is the CacheFile the fuzz target reads with: scan needs only
// its identity (the pool is never touched).
var fuzzFile = &CacheFile{
	Identity: CacheIdentity{Model: "fuzz", BlockSize: 2, Layers: 1, KVDim: 4, DType: "float32"},
	Seed:     kvevents.DefaultHashSeed,
}

// validFile builds a file fuzzFile accepts: one chain of n blocks whose
// tokens start at first, with zero KV.
func validFile(t testing.TB, n int, first int32) []byte {
	t.Helper()
	c := fuzzFile
	hdr, err := json.Marshal(cachefile.Header{Identity: c.Identity, Seed: c.Seed, Blocks: n})
	if err != nil {
		t.Fatal(err)
	}
	f := append([]byte(cachefile.Magic), binary.LittleEndian.AppendUint32(nil, uint32(len(hdr)))...)
	f = append(f, hdr...)
	h := kvevents.NewHasher(c.Identity.HashAlgo, c.Seed, "")
	var parent kvevents.Hash
	for i := range n {
		tokens := []int32{first + int32(2*i), first + int32(2*i+1)}
		hash := h.First(tokens, "")
		if i > 0 {
			hash = h.Next(parent, tokens)
		}
		f = append(f, hash[:]...)
		if i > 0 {
			f = append(f, 1)
			f = append(f, parent[:]...)
		} else {
			f = append(f, cachefile.NoParent[:]...)
		}
		for _, tok := range tokens {
			f = binary.LittleEndian.AppendUint32(f, uint32(tok))
		}
		f = append(f, make([]byte, c.blockBytes()-65-4*len(tokens))...)
		parent = hash
	}
	sum := sha256.Sum256(f)
	return append(f, sum[:]...)
}

// FuzzCacheFileScan feeds scan, the reader of every cache and slot file,
// arbitrary bytes: it must never panic, never allocate more than twice the
// file (plus its fixed buffer), and accept only a file whose records fill
// it exactly. With fixSum the checksum is recomputed over the mutated
// bytes, so the fuzzer gets past it to the header and the records. The
// seed corpus (testdata/fuzz/FuzzCacheFileScan) holds valid files, the
// block count that wraps around, and cut and flipped ones.
func FuzzCacheFileScan(f *testing.F) {
	valid := validFile(f, 3, 10)
	if blocks, err := fuzzFile.scan(bytes.NewReader(valid), int64(len(valid))); err != nil || len(blocks) != 3 {
		f.Fatalf("the valid seed is refused (%v) or misread (%d blocks)", err, len(blocks))
	}
	f.Add(valid, false)
	f.Add(wrappingCountFile(f, fuzzFile.Identity, fuzzFile.Seed, int64(fuzzFile.blockBytes())), false)
	f.Fuzz(func(t *testing.T, raw []byte, fixSum bool) {
		if fixSum && len(raw) >= sha256.Size {
			raw = bytes.Clone(raw)
			sum := sha256.Sum256(raw[:len(raw)-sha256.Size])
			copy(raw[len(raw)-sha256.Size:], sum[:])
		}
		var blocks []cachefile.Record
		var err error
		used := allocated(func() { blocks, err = fuzzFile.scan(bytes.NewReader(raw), int64(len(raw))) })
		if limit := 2*uint64(len(raw)) + 2*cachefile.BufferBytes; used > limit {
			t.Fatalf("scan of %d bytes allocated %d, over %d", len(raw), used, limit)
		}
		if err != nil {
			return
		}
		rec := int64(fuzzFile.blockBytes())
		if len(blocks) > 0 && blocks[len(blocks)-1].KVAt+rec-65-4*2 != int64(len(raw))-sha256.Size {
			t.Fatalf("accepted %d blocks that do not end where the checksum starts", len(blocks))
		}
	})
}
