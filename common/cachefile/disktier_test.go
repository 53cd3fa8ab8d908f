package cachefile

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

var tierID = Identity{Model: "model-a", BlockSize: 4, Layers: 2, KVDim: 8, DType: "bfloat16"}

const tierSeed = kvevents.DefaultHashSeed

// hang bounds a wait that only a bug makes long: the test fails instead of
// stalling the run. It is not a speed goal.
const hang = 10 * time.Second

// tierBlocks is a chain of n blocks of id under seed whose tokens start at
// first, each with KV of its own, as the pool demotes them.
func tierBlocks(id Identity, seed string, n int, first int32) []kvcache.TierBlock {
	h := kvevents.NewHasher(id.HashAlgo, seed, id.LoRA)
	rng := rand.New(rand.NewPCG(uint64(first), 7))
	var out []kvcache.TierBlock
	for i := range n {
		b := kvcache.TierBlock{Tokens: make([]int32, id.BlockSize), KV: make([]byte, id.KVBytes())}
		for j := range b.Tokens {
			b.Tokens[j] = first + int32(i*id.BlockSize+j)
		}
		for j := range b.KV {
			b.KV[j] = byte(rng.Uint32())
		}
		b.Sum = kvcache.TierSum(b.KV)
		if i == 0 {
			b.Hash = h.First(b.Tokens, "")
		} else {
			p := out[i-1].Hash
			b.Parent, b.Hash = &p, h.Next(p, b.Tokens)
		}
		out = append(out, b)
	}
	return out
}

// openTier opens a tier of tierID in dir with a budget of files block
// files, closed when the test ends.
func openTier(t *testing.T, dir string, files int, mod ...func(*DiskTierConfig)) *DiskTier {
	t.Helper()
	cfg := DiskTierConfig{Dir: dir, Identity: tierID, Seed: tierSeed}
	cfg.Capacity = int64(files) * blockFileBytes(t, tierID, tierSeed)
	for _, m := range mod {
		m(&cfg)
	}
	d, err := OpenDiskTier(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func blockFileBytes(t *testing.T, id Identity, seed string) int64 {
	hdr, err := MarshalHeader(id, seed, 1)
	require.NoError(t, err)
	return int64(LeadBytes + len(hdr) + id.RecordBytes() + sha256.Size)
}

// fill puts bs into a fresh tier in dir and closes it, so the files are
// there for the next tier to find.
func fill(t *testing.T, dir string, files int, bs []kvcache.TierBlock) {
	t.Helper()
	d := openTier(t, dir, files)
	for _, b := range bs {
		d.Put(b)
	}
	require.NoError(t, d.Close())
	require.Equal(t, len(bs), d.Stats().Puts)
}

func requireSameBlock(t *testing.T, want, have kvcache.TierBlock) {
	t.Helper()
	assert.Equal(t, want.Hash, have.Hash)
	assert.Equal(t, want.Parent, have.Parent)
	assert.Equal(t, want.Tokens, have.Tokens)
	require.True(t, bytes.Equal(want.KV, have.KV), "the KV comes back byte for byte")
	assert.True(t, have.Intact(), "and its checksum says so")
}

func blockPath(dir string, h kvevents.Hash) string {
	return filepath.Join(dir, IdentityDir(tierID, tierSeed), blockName(h))
}

// TestDiskTierGivesBackWhatItWrote: a block put and flushed comes back
// byte for byte and intact, from a file that is a cache file of the
// format (Scan reads it: one record, this identity and seed), and a new
// tier on the same directory finds every block (a warm restart).
func TestDiskTierGivesBackWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	bs := tierBlocks(tierID, tierSeed, 3, 10)
	d := openTier(t, dir, 10)
	for _, b := range bs {
		d.Put(b)
	}
	require.NoError(t, d.Flush(hang))
	for _, b := range bs {
		have, ok := d.Get(b.Hash)
		require.True(t, ok)
		requireSameBlock(t, b, have)
	}
	s := d.Stats()
	assert.Equal(t, 3, s.Blocks)
	assert.Equal(t, 3, s.Puts)
	assert.Equal(t, 3*d.FileBytes(), s.Bytes)

	raw, err := os.ReadFile(blockPath(dir, bs[1].Hash))
	require.NoError(t, err)
	hdr, recs, err := Scan(bytes.NewReader(raw), int64(len(raw)), tierID)
	require.NoError(t, err, "a block file is a cache file")
	assert.Equal(t, tierSeed, hdr.Seed)
	require.Len(t, recs, 1)
	assert.Equal(t, bs[1].Hash, recs[0].Hash)
	assert.Equal(t, bs[0].Hash, recs[0].Parent)
	require.NoError(t, d.Close())

	again := openTier(t, dir, 10)
	assert.Equal(t, 3, again.Stats().Blocks, "the restarted tier finds the blocks")
	for _, b := range bs {
		require.True(t, again.Has(b.Hash))
		have, ok := again.Get(b.Hash)
		require.True(t, ok)
		requireSameBlock(t, b, have)
	}
	assert.Zero(t, again.Stats().Corrupt)
}

// TestDiskTierRefusesHostileFiles: block files damaged or replaced as a
// careless tool or a hostile peer would are refused without a panic and
// never promoted, whether they are there when the tier opens (its index
// refuses them at once) or change after (Get does). A refused file is set
// aside byte for byte: never deleted, never overwritten, even when the
// block is stored again. What is not a regular file (a directory, a
// symbolic link) is left alone, never read through and never written
// over; a file removed by hand is a miss, not a refusal.
func TestDiskTierRefusesHostileFiles(t *testing.T) {
	bs := tierBlocks(tierID, tierSeed, 3, 20)
	victim := bs[1]
	idB := Identity{Model: "model-b", BlockSize: 4, Layers: 2, KVDim: 8, DType: "bfloat16"}
	// foreign is the file another tier in another directory writes for
	// block b, of the same size as this tier's.
	foreign := func(t *testing.T, id Identity, seed string, b kvcache.TierBlock) []byte {
		d, err := OpenDiskTier(DiskTierConfig{Dir: t.TempDir(), Capacity: 1 << 20, Identity: id, Seed: seed})
		require.NoError(t, err)
		d.Put(b)
		require.NoError(t, d.Close())
		raw, err := os.ReadFile(filepath.Join(d.Dir(), blockName(b.Hash)))
		require.NoError(t, err)
		return raw
	}
	tamperTokens := func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
		// A token changed and the checksum recomputed, as a tool that
		// "repairs" files would.
		b := bytes.Clone(raw[victim.Hash])
		b[len(b)-sha256.Size-tierID.KVBytes()-1] ^= 1
		sum := sha256.Sum256(b[:len(b)-sha256.Size])
		copy(b[len(b)-sha256.Size:], sum[:])
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	directory := func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Mkdir(path, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(path, "keep"), []byte("mine"), 0o644))
	}
	dirKept := func(t *testing.T, path string) {
		keep, err := os.ReadFile(filepath.Join(path, "keep"))
		require.NoError(t, err, "the directory is left as it was")
		assert.Equal(t, "mine", string(keep))
	}
	// A link to a valid copy of the victim's file elsewhere: reading
	// through it would read outside the tier's subdirectory.
	var target string
	symlink := func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
		target = filepath.Join(t.TempDir(), "elsewhere.kv")
		require.NoError(t, os.WriteFile(target, raw[victim.Hash], 0o644))
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Symlink(target, path))
	}
	linkKept := func(t *testing.T, path string) {
		st, err := os.Lstat(path)
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, st.Mode().Type(), "the link is left as it was")
		have, err := os.Readlink(path)
		require.NoError(t, err)
		assert.Equal(t, target, have)
	}

	const (
		aside = iota // set aside and counted
		left         // left where it is, not counted
		gone         // a miss
	)
	for _, c := range []struct {
		name string
		// spoil changes the victim's file at path; raw holds the files
		// as the tier wrote them, by hash.
		spoil func(t *testing.T, path string, raw map[kvevents.Hash][]byte)
		// late spoils the file after the tier indexed it, so the check
		// is Get's.
		late bool
		fate int
		kept func(t *testing.T, path string) // for what is left: it is as it was
	}{
		{name: "truncated", fate: aside, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			require.NoError(t, os.Truncate(path, int64(len(raw[victim.Hash])-100)))
		}},
		{name: "truncated, after the index", fate: aside, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			require.NoError(t, os.Truncate(path, int64(len(raw[victim.Hash])-100)))
		}},
		{name: "flipped byte", fate: aside, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			b := bytes.Clone(raw[victim.Hash])
			b[len(b)-sha256.Size-7] ^= 0x10 // in the KV: only the checksum tells
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}},
		{name: "tampered tokens", fate: aside, spoil: tamperTokens},
		{name: "tampered tokens, after the index", fate: aside, late: true, spoil: tamperTokens},
		{name: "another identity", fate: aside, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			b := foreign(t, idB, tierSeed, tierBlocks(idB, tierSeed, 2, 20)[1])
			require.Len(t, b, len(raw[victim.Hash]))
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}},
		{name: "another identity, after the index", fate: aside, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			b := foreign(t, idB, tierSeed, tierBlocks(idB, tierSeed, 2, 20)[1])
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}},
		{name: "another seed, after the index", fate: aside, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			// A seed of the same length: a file of the same size.
			b := foreign(t, tierID, "1", tierBlocks(tierID, "1", 2, 20)[1])
			require.Len(t, b, len(raw[victim.Hash]))
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}},
		{name: "another block's record", fate: aside, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			require.NoError(t, os.WriteFile(path, raw[bs[2].Hash], 0o644))
		}},
		{name: "another block's record, after the index", fate: aside, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			// A valid file of this tier: only its name is wrong.
			require.NoError(t, os.WriteFile(path, raw[bs[2].Hash], 0o644))
		}},
		{name: "a directory", fate: left, spoil: directory, kept: dirKept},
		{name: "a directory, after the index", fate: left, late: true, spoil: directory, kept: dirKept},
		{name: "a symbolic link", fate: left, spoil: symlink, kept: linkKept},
		{name: "a symbolic link, after the index", fate: left, late: true, spoil: symlink, kept: linkKept},
		{name: "removed, after the index", fate: gone, late: true, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			require.NoError(t, os.Remove(path))
		}},
		{name: "unreadable", fate: aside, spoil: func(t *testing.T, path string, raw map[kvevents.Hash][]byte) {
			if os.Geteuid() == 0 {
				t.Skip("root reads a file of mode 000")
			}
			require.NoError(t, os.Chmod(path, 0))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fill(t, dir, 10, bs)
			raw := map[kvevents.Hash][]byte{}
			for _, b := range bs {
				f, err := os.ReadFile(blockPath(dir, b.Hash))
				require.NoError(t, err)
				raw[b.Hash] = f
			}
			path := blockPath(dir, victim.Hash)
			var d *DiskTier
			if c.late {
				d = openTier(t, dir, 10)
				require.True(t, d.Has(victim.Hash))
			}
			c.spoil(t, path, raw)
			spoiled, _ := os.ReadFile(path)
			if d == nil {
				d = openTier(t, dir, 10)
				assert.False(t, d.Has(victim.Hash), "the index leaves it out")
				assert.Equal(t, 2, d.Stats().Blocks)
				if c.fate == aside {
					assert.Equal(t, 1, d.Stats().Corrupt, "refused when the tier opens")
				}
			}

			_, ok := d.Get(victim.Hash)
			assert.False(t, ok, "the spoiled block is never promoted")
			assert.False(t, d.Has(victim.Hash), "nor found again")
			for _, b := range []kvcache.TierBlock{bs[0], bs[2]} {
				have, ok := d.Get(b.Hash)
				require.True(t, ok, "the other blocks are served")
				requireSameBlock(t, b, have)
			}

			asides, _ := filepath.Glob(path + RefusedMark + "*")
			if c.fate == aside {
				assert.Equal(t, 1, d.Stats().Corrupt, "counted")
				require.Len(t, asides, 1, "set aside")
				assert.Equal(t, []string{asides[0]}, d.SetAside())
				if spoiled != nil {
					kept, err := os.ReadFile(asides[0])
					require.NoError(t, err)
					assert.True(t, bytes.Equal(spoiled, kept), "byte for byte")
				}
			} else {
				assert.Zero(t, d.Stats().Corrupt)
				assert.Empty(t, asides, "nothing set aside")
			}

			// The block demoted again: a fresh file, or none where the
			// name holds what is not the tier's.
			d.Put(victim)
			if c.fate == left {
				assert.False(t, d.Has(victim.Hash), "not even queued")
			}
			require.NoError(t, d.Flush(hang))
			if c.fate == left {
				assert.False(t, d.Has(victim.Hash), "never written over what is not the tier's")
				c.kept(t, path)
				return
			}
			have, ok := d.Get(victim.Hash)
			require.True(t, ok, "stored again under its name")
			requireSameBlock(t, victim, have)
			if c.fate == aside && spoiled != nil {
				kept, err := os.ReadFile(asides[0])
				require.NoError(t, err)
				assert.True(t, bytes.Equal(spoiled, kept), "the file set aside is never overwritten")
			}
		})
	}
}

// TestDiskTierNeverOverwritesAStrangersFile: a file that appears under
// the name of a block the tier does not hold is not the tier's: storing
// that block leaves the file as it is, and the block is dropped.
func TestDiskTierNeverOverwritesAStrangersFile(t *testing.T) {
	dir := t.TempDir()
	d := openTier(t, dir, 10)
	b := tierBlocks(tierID, tierSeed, 1, 25)[0]
	path := blockPath(dir, b.Hash)
	require.NoError(t, os.WriteFile(path, []byte("a stranger's"), 0o644))
	d.Put(b)
	require.NoError(t, d.Flush(hang))
	assert.False(t, d.Has(b.Hash))
	assert.Equal(t, 1, d.Stats().Dropped)
	have, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a stranger's", string(have))
	d.Put(b)
	assert.False(t, d.Has(b.Hash), "the name is not tried again")
}

// TestDiskTierLeavesOtherIdentitiesAlone: two tiers of different models
// share a directory, each over its budget: neither counts, reads, evicts
// or removes the other's files, nor a stranger's file, nor a temporary
// file in the other's subdirectory; each removes only its own stale
// temporary files.
func TestDiskTierLeavesOtherIdentitiesAlone(t *testing.T) {
	dir := t.TempDir()
	idB := tierID
	idB.Model = "model-b"
	openB := func() *DiskTier {
		d, err := OpenDiskTier(DiskTierConfig{Dir: dir, Capacity: 2 * blockFileBytes(t, idB, tierSeed), Identity: idB, Seed: tierSeed})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, b := openTier(t, dir, 2), openB()
	require.NotEqual(t, a.Dir(), b.Dir())
	for _, blk := range tierBlocks(tierID, tierSeed, 4, 30) {
		a.Put(blk)
		require.NoError(t, a.Flush(hang))
	}
	bBlocks := tierBlocks(idB, tierSeed, 2, 30)
	for _, blk := range bBlocks {
		b.Put(blk)
	}
	require.NoError(t, b.Flush(hang))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	stranger := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(stranger, []byte("not a cache"), 0o644))
	staleA := filepath.Join(a.Dir(), ".kvcache-123")
	staleB := filepath.Join(b.Dir(), ".kvcache-456")
	require.NoError(t, os.WriteFile(staleA, nil, 0o644))
	require.NoError(t, os.WriteFile(staleB, nil, 0o644))

	bFiles, err := os.ReadDir(b.Dir())
	require.NoError(t, err)
	a = openTier(t, dir, 1) // a smaller budget: it evicts, its own files only
	assert.Equal(t, 1, a.Stats().Blocks, "only its own blocks count")
	assert.Equal(t, 1, a.Stats().Evictions)
	for _, blk := range bBlocks {
		assert.False(t, a.Has(blk.Hash))
	}
	now, err := os.ReadDir(b.Dir())
	require.NoError(t, err)
	assert.Equal(t, names(bFiles), names(now), "the other identity's files are untouched")
	_, err = os.Stat(stranger)
	assert.NoError(t, err)
	_, err = os.Stat(staleA)
	assert.ErrorIs(t, err, os.ErrNotExist, "its own stale temporary file is removed")

	b = openB()
	assert.Equal(t, 2, b.Stats().Blocks)
	assert.Zero(t, b.Stats().Corrupt)
	_, err = os.Stat(staleB)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestDiskTierEvictsTheLeastRecentlyUsed: within a budget of three files,
// a fourth block evicts the one least recently put or got (a Get makes a
// block recent, and so does a Put of a block the tier holds, which writes
// nothing), the files never pass the budget, and a restart under a
// smaller budget evicts in the same order, from the files' times.
func TestDiskTierEvictsTheLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	bs := tierBlocks(tierID, tierSeed, 5, 40)
	a, b, c, e, f := bs[0], bs[1], bs[2], bs[3], bs[4]
	d := openTier(t, dir, 3)
	for _, blk := range []kvcache.TierBlock{a, b, c} {
		d.Put(blk)
		require.NoError(t, d.Flush(hang))
	}
	_, ok := d.Get(a.Hash)
	require.True(t, ok)
	d.Put(e)
	require.NoError(t, d.Flush(hang))
	for _, blk := range []kvcache.TierBlock{a, c, e} {
		assert.True(t, d.Has(blk.Hash))
		assert.FileExists(t, blockPath(dir, blk.Hash))
	}
	assert.False(t, d.Has(b.Hash), "b was the least recently used")
	assert.NoFileExists(t, blockPath(dir, b.Hash), "its file is removed")
	s := d.Stats()
	assert.Equal(t, 1, s.Evictions)
	assert.LessOrEqual(t, s.Bytes, s.Capacity)

	before, err := os.Stat(blockPath(dir, c.Hash))
	require.NoError(t, err)
	d.Put(c) // the order is now c, e, a
	require.NoError(t, d.Flush(hang))
	d.Put(f)
	require.NoError(t, d.Flush(hang))
	assert.False(t, d.Has(a.Hash), "a was now the least recently used")
	assert.True(t, d.Has(c.Hash), "c, put again, was not")
	after, err := os.Stat(blockPath(dir, c.Hash))
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "c's second Put wrote nothing")
	assert.Equal(t, 2, d.Stats().Evictions)
	_, ok = d.Get(e.Hash) // the order is now e, f, c
	require.True(t, ok)
	require.NoError(t, d.Close())

	small := openTier(t, dir, 2)
	assert.True(t, small.Has(e.Hash), "the most recent survive a restart")
	assert.True(t, small.Has(f.Hash), "written after c was touched, f is more recent than c")
	assert.False(t, small.Has(c.Hash))
	assert.Equal(t, 1, small.Stats().Evictions)
	files, err := os.ReadDir(small.Dir())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{blockName(e.Hash), blockName(f.Hash)}, names(files))
}

// stalled is a test hook that holds the writer before each write until
// release is closed, and reports each block it holds on held.
func stalled() (hook func(kvevents.Hash), held chan kvevents.Hash, release chan struct{}) {
	held, release = make(chan kvevents.Hash, 100), make(chan struct{})
	return func(h kvevents.Hash) {
		held <- h
		<-release
	}, held, release
}

// TestDiskTierDropsWhatItsQueueCannotHold: with the writer stalled, a
// queue of two blocks takes two, drops the third and counts it, and
// still serves the queued ones from memory; a queue of a file and a half
// in bytes takes one. Once the writer goes on, the queued blocks are
// written and the dropped one is not.
func TestDiskTierDropsWhatItsQueueCannotHold(t *testing.T) {
	bs := tierBlocks(tierID, tierSeed, 3, 50)
	for _, c := range []struct {
		name  string
		cfg   func(*DiskTierConfig)
		taken int
	}{
		{"blocks", func(c *DiskTierConfig) { c.QueueBlocks = 2 }, 2},
		{"bytes", func(c *DiskTierConfig) { c.QueueBytes = blockFileBytes(t, tierID, tierSeed) * 3 / 2 }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			hook, held, release := stalled()
			d := openTier(t, t.TempDir(), 10, c.cfg, func(c *DiskTierConfig) { c.beforeWrite = hook })
			for _, b := range bs {
				d.Put(b) // returns: a full queue drops, it does not wait
			}
			<-held
			s := d.Stats()
			assert.Equal(t, len(bs)-c.taken, s.Dropped, "what did not fit is dropped and counted")
			assert.Equal(t, c.taken, s.Blocks)
			for i, b := range bs {
				assert.Equal(t, i < c.taken, d.Has(b.Hash), "block %d", i)
			}
			have, ok := d.Get(bs[c.taken-1].Hash)
			require.True(t, ok, "a queued block is served from memory")
			requireSameBlock(t, bs[c.taken-1], have)

			close(release)
			require.NoError(t, d.Flush(hang))
			for i, b := range bs {
				_, err := os.Stat(filepath.Join(d.Dir(), blockName(b.Hash)))
				assert.Equal(t, i < c.taken, err == nil, "block %d's file", i)
			}
		})
	}
}

// TestDiskTierPutNeverWaitsForTheDisk: with the writer stuck in a write
// (a disk that does not answer), Put still returns for every block, Has
// and Get serve the queued blocks, and Close gives up after its bounded
// wait, dropping and counting what it could not write.
func TestDiskTierPutNeverWaitsForTheDisk(t *testing.T) {
	hook, held, release := stalled()
	d := openTier(t, t.TempDir(), 100, func(c *DiskTierConfig) {
		c.beforeWrite, c.FlushWait = hook, 50*time.Millisecond
	})
	bs := tierBlocks(tierID, tierSeed, 20, 60)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range bs {
			d.Put(b)
		}
	}()
	select {
	case <-done:
	case <-time.After(hang):
		t.Fatal("Put waited for the stalled writer")
	}
	<-held
	for _, b := range bs {
		have, ok := d.Get(b.Hash)
		require.True(t, ok)
		requireSameBlock(t, b, have)
	}
	assert.Equal(t, len(bs), d.Stats().Hits)
	err := d.Close()
	require.Error(t, err, "the writer never finished")
	assert.Contains(t, err.Error(), "19 queued blocks dropped")
	assert.Equal(t, 19, d.Stats().Dropped)
	d.Put(tierBlocks(tierID, tierSeed, 1, 99)[0])
	assert.Equal(t, 20, d.Stats().Dropped, "a closed tier takes nothing")

	close(release) // the disk answers: the write under way ends, and the writer with it
	select {
	case <-d.done:
	case <-time.After(hang):
		t.Fatal("the writer did not stop after its write")
	}
}

// TestDiskTierStoresNoSaltedBlock: the format records no salt, so a
// block cached under one is dropped, not written, and not found.
func TestDiskTierStoresNoSaltedBlock(t *testing.T) {
	d := openTier(t, t.TempDir(), 10)
	b := tierBlocks(tierID, tierSeed, 1, 70)[0]
	b.Salted = true
	d.Put(b)
	require.NoError(t, d.Flush(hang))
	assert.False(t, d.Has(b.Hash))
	assert.Equal(t, 1, d.Stats().Dropped)
	files, err := os.ReadDir(d.Dir())
	require.NoError(t, err)
	assert.Empty(t, files)
}

// TestDiskTierNeverWritesAChangedBlock: a block whose KV changed since it
// was demoted (its checksum fails) is never served, even from the queue,
// and is counted corrupt and not written; one whose hash is not the hash
// of its tokens is dropped: either would be a file every reader refuses,
// or worse, serves.
func TestDiskTierNeverWritesAChangedBlock(t *testing.T) {
	hook, held, release := stalled()
	d := openTier(t, t.TempDir(), 10, func(c *DiskTierConfig) { c.beforeWrite = hook })
	bs := tierBlocks(tierID, tierSeed, 2, 80)
	bs[0].KV[3] ^= 1
	bs[1].Tokens[0]++
	d.Put(bs[0])
	d.Put(bs[1])
	<-held
	_, ok := d.Get(bs[0].Hash)
	assert.False(t, ok, "a queued block whose KV changed is not served")
	close(release)
	require.NoError(t, d.Flush(hang))
	_, ok = d.Get(bs[0].Hash)
	assert.False(t, ok)
	s := d.Stats()
	assert.Equal(t, 1, s.Corrupt)
	assert.Equal(t, 1, s.Dropped)
	files, err := os.ReadDir(d.Dir())
	require.NoError(t, err)
	assert.Empty(t, files)
}

// TestDiskTierDropsWhatIsNotItsBlock: a block of another size (tokens or
// KV), a block over the whole budget, and a second Put of a block still
// queued are not written (the last is written once).
func TestDiskTierDropsWhatIsNotItsBlock(t *testing.T) {
	bs := tierBlocks(tierID, tierSeed, 3, 90)
	short := bs[0]
	short.KV = short.KV[:len(short.KV)-2]
	short.Sum = kvcache.TierSum(short.KV)
	long := bs[1]
	long.Tokens = append(slices.Clone(long.Tokens), 1)

	hook, held, release := stalled()
	d := openTier(t, t.TempDir(), 10, func(c *DiskTierConfig) { c.beforeWrite = hook })
	d.Put(short)
	d.Put(long)
	d.Put(bs[2])
	d.Put(bs[2])
	<-held
	assert.Equal(t, 2, d.Stats().Dropped)
	assert.Equal(t, 1, d.Stats().Blocks)
	close(release)
	require.NoError(t, d.Flush(hang))
	assert.Equal(t, 1, d.Stats().Puts)
	files, err := os.ReadDir(d.Dir())
	require.NoError(t, err)
	assert.Equal(t, []string{blockName(bs[2].Hash)}, names(files))

	tiny, err := OpenDiskTier(DiskTierConfig{Dir: t.TempDir(), Capacity: d.FileBytes() - 1, Identity: tierID, Seed: tierSeed})
	require.NoError(t, err)
	tiny.Put(bs[2])
	require.NoError(t, tiny.Close())
	assert.Equal(t, 1, tiny.Stats().Dropped, "a budget under one file holds nothing")
	assert.False(t, tiny.Has(bs[2].Hash))
}

// TestIdentityDirTellsIdentitiesApart: every field of the identity, and
// the seed, changes the subdirectory.
func TestIdentityDirTellsIdentitiesApart(t *testing.T) {
	seen := map[string]string{IdentityDir(tierID, tierSeed): "base"}
	for name, id := range map[string]Identity{
		"model":      {Model: "x", BlockSize: 4, Layers: 2, KVDim: 8, DType: "bfloat16"},
		"block size": {Model: "model-a", BlockSize: 8, Layers: 2, KVDim: 8, DType: "bfloat16"},
		"layers":     {Model: "model-a", BlockSize: 4, Layers: 3, KVDim: 8, DType: "bfloat16"},
		"kv dim":     {Model: "model-a", BlockSize: 4, Layers: 2, KVDim: 16, DType: "bfloat16"},
		"dtype":      {Model: "model-a", BlockSize: 4, Layers: 2, KVDim: 8, DType: "float16"},
		"hash algo":  {Model: "model-a", BlockSize: 4, Layers: 2, KVDim: 8, DType: "bfloat16", HashAlgo: kvevents.XXHash},
		"lora":       {Model: "model-a", BlockSize: 4, Layers: 2, KVDim: 8, DType: "bfloat16", LoRA: "l"},
	} {
		d := IdentityDir(id, tierSeed)
		require.NotContains(t, seen, d, "%s collides with %s", name, seen[d])
		seen[d] = name
	}
	d := IdentityDir(tierID, "another seed")
	require.NotContains(t, seen, d)
	assert.True(t, strings.HasPrefix(d, "kv-"))
	assert.Len(t, d, len("kv-")+24)
}

// TestSetAsideNeverOverwrites: two files set aside under one name at one
// instant are both kept.
func TestSetAsideNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvcache.bin")
	now := time.Now()
	var asides []string
	for _, body := range []string{"first", "second"} {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		aside, err := SetAside(path, now)
		require.NoError(t, err)
		asides = append(asides, aside)
	}
	require.NotEqual(t, asides[0], asides[1])
	for i, body := range []string{"first", "second"} {
		have, err := os.ReadFile(asides[i])
		require.NoError(t, err)
		assert.Equal(t, body, string(have))
	}
	assert.NoFileExists(t, path)
}

// BenchmarkDiskTierGet reads and checks one block file (from the page
// cache), as a promotion does on the engine's goroutine: this test's tiny
// block, and one of 16 tokens of a model of 32 layers × 1024 KV width in
// bfloat16 (2 MiB, a Llama-3-8B's).
func BenchmarkDiskTierGet(b *testing.B) {
	for _, c := range []struct {
		name string
		id   Identity
	}{
		{"tiny", tierID},
		{"8B-bf16", Identity{Model: "m", BlockSize: 16, Layers: 32, KVDim: 1024, DType: "bfloat16"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := OpenDiskTier(DiskTierConfig{Dir: b.TempDir(), Capacity: 1 << 30, Identity: c.id, Seed: tierSeed})
			require.NoError(b, err)
			defer d.Close()
			blk := tierBlocks(c.id, tierSeed, 1, 1)[0]
			d.Put(blk)
			require.NoError(b, d.Flush(hang))
			b.SetBytes(d.FileBytes())
			for b.Loop() {
				if _, ok := d.Get(blk.Hash); !ok {
					b.Fatal("missed")
				}
			}
		})
	}
}

// TestDiskTierAuditsItsBooks: after puts, evictions, gets and a refused
// file the books balance; a count of bytes off by one file, a block both
// pending and stored, and an evicted block left in the index are each
// reported.
func TestDiskTierAuditsItsBooks(t *testing.T) {
	var _ kvcache.TierAuditor = (*DiskTier)(nil)
	dir := t.TempDir()
	d := openTier(t, dir, 3)
	bs := tierBlocks(tierID, tierSeed, 5, 100)
	for _, b := range bs {
		d.Put(b)
		require.NoError(t, d.AuditTier())
	}
	require.NoError(t, d.Flush(hang))
	require.NoError(t, os.WriteFile(blockPath(dir, bs[4].Hash), []byte("spoiled"), 0o644))
	_, ok := d.Get(bs[4].Hash)
	require.False(t, ok)
	_, ok = d.Get(bs[3].Hash)
	require.True(t, ok)
	require.NoError(t, d.AuditTier())

	for name, spoil := range map[string]func(){
		"bytes":   func() { d.bytes += d.fileBytes },
		"pending": func() { d.pending[bs[3].Hash] = &bs[3] },
		"index":   func() { d.byHash[bs[0].Hash] = d.lru.Front() }, // evicted, yet indexed
	} {
		d.mu.Lock()
		n, pending := d.bytes, maps.Clone(d.pending)
		lru, byHash := list.New(), map[kvevents.Hash]*list.Element{}
		for e := d.lru.Back(); e != nil; e = e.Prev() {
			byHash[e.Value.(kvevents.Hash)] = lru.PushFront(e.Value)
		}
		spoil()
		d.mu.Unlock()
		assert.Error(t, d.AuditTier(), name)
		d.mu.Lock()
		d.bytes, d.pending, d.lru, d.byHash = n, pending, lru, byHash
		d.mu.Unlock()
		require.NoError(t, d.AuditTier(), "restored after %s", name)
	}
}
