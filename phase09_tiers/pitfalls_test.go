package main

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// Each TestPitfall reproduces one entry of PITFALLS.md: it runs the buggy
// behaviour (a tier that injects it through the kvcache.Tier seam, or the
// configuration that has it), asserts the symptom, and shows that the real
// code does not have it. Every promotion they count happens in the first
// request of a fresh engine: the cost rule has measured no forward yet,
// so it skips nothing, and the counts do not depend on the machine.

// pitBlock is the block size of the pitfall engines: a pool of 12 blocks
// of 4 tokens, one sequence at a time, audited after every step.
const pitBlock = 4

func pitEngine(t *testing.T, m *model.Model, tiers ...kvcache.Tier) *engine.Engine {
	t.Helper()
	return poolEngine(t, m, 12, len(tiers) > 0, tiers...)
}

// poolEngine is a pitfall engine of blocks blocks, with the radix tree
// when cached.
func poolEngine(t *testing.T, m *model.Model, blocks int, cached bool, tiers ...kvcache.Tier) *engine.Engine {
	t.Helper()
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = pitBlock, blocks, 32, 1
	c.Audit = true
	if cached {
		c.PrefixCache, c.Tiers = radix.PrefixCache, tiers
	}
	e, err := engine.New(m, c)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func serve(t *testing.T, e *engine.Engine, id int, p []int32, salt string) engine.Result {
	t.Helper()
	res := e.RunAll([]engine.Request{{ID: id, Prompt: p, MaxTokens: 3, IgnoreEOS: true, KeepLogits: true, CacheSalt: salt}})
	require.NoError(t, res[id].Err)
	return *res[id]
}

// evictAll serves two prompts of 40 tokens after whatever e served, so
// that the pool, which cannot hold them and anything else, evicts every
// block it cached before: into e's tiers.
func evictAll(t *testing.T, e *engine.Engine) {
	t.Helper()
	serve(t, e, 101, slices.Repeat([]int32{9}, 40), "")
	serve(t, e, 102, slices.Repeat([]int32{8}, 40), "")
}

// logitGap is the largest difference between two results' logits, and
// how many of their tokens differ.
func logitGap(a, b engine.Result) (gap float64, tokens int) {
	for i := range min(len(a.Tokens), len(b.Tokens)) {
		if a.Tokens[i] != b.Tokens[i] {
			tokens++
		}
	}
	for i := range min(len(a.Logits), len(b.Logits)) {
		for j := range min(len(a.Logits[i]), len(b.Logits[i])) {
			gap = math.Max(gap, math.Abs(float64(a.Logits[i][j]-b.Logits[i][j])))
		}
	}
	return gap, tokens
}

// pitPrompt is four whole blocks and two tokens.
func pitPrompt(first int32) []int32 {
	p := make([]int32, 4*pitBlock+2)
	for i := range p {
		p[i] = first + int32(11*i)
	}
	return p
}

// heldTier holds exactly the blocks a test gives it.
type heldTier struct {
	blocks map[kvevents.Hash]kvcache.TierBlock
}

func (h *heldTier) Name() string            { return "CPU" }
func (h *heldTier) Put(b kvcache.TierBlock) { h.blocks[b.Hash] = b }
func (h *heldTier) Get(x kvevents.Hash) (kvcache.TierBlock, bool) {
	b, ok := h.blocks[x]
	return b, ok
}
func (h *heldTier) Has(x kvevents.Hash) bool { _, ok := h.blocks[x]; return ok }
func (h *heldTier) Stats() kvcache.TierStats {
	return kvcache.TierStats{Name: "CPU", Blocks: len(h.blocks)}
}

// demoted serves p under salt, then evicts it, and returns the RAM tier
// that holds its blocks.
func demoted(t *testing.T, m *model.Model, p []int32, salt string) *kvcache.RAMTier {
	t.Helper()
	ram := kvcache.NewRAMTier(64<<20, nil)
	e := pitEngine(t, m, ram)
	serve(t, e, 1, p, salt)
	evictAll(t, e)
	for i, h := range kvevents.BlockHashes(p, pitBlock, salt) {
		require.True(t, ram.Has(h), "block %d was demoted", i)
	}
	return ram
}

// TestPitfallPromotionPastAGap: the tier holds blocks 0, 2 and 3 of a
// prompt but not block 1 (evicted before the others, say). A promotion
// that stepped over the gap would append block 2 to the page table where
// block 1 belongs, and block 3 where block 2 does: the tier below injects
// exactly that page table. Attention then reads every block from the gap
// on at the wrong positions, and the output is not the uncached engine's.
// The pool stops at the first block no tier holds.
func TestPitfallPromotionPastAGap(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	p := pitPrompt(3)
	want := serve(t, pitEngine(t, m), 1, p, "")
	ram := demoted(t, m, p, "")
	hs := kvevents.BlockHashes(p, pitBlock, "")
	b := make([]kvcache.TierBlock, len(hs))
	for i, h := range hs {
		var ok bool
		b[i], ok = ram.Get(h)
		require.True(t, ok)
	}
	// The bug's page table: after block 0, each page holds its successor's
	// KV (block 1 is missing, so block 2 moved up one, and block 3 too).
	early := func(i int) kvcache.TierBlock {
		x := b[i]
		x.KV = b[i+1].KV
		x.Sum = kvcache.TierSum(x.KV)
		return x
	}
	shifted := &heldTier{blocks: map[kvevents.Hash]kvcache.TierBlock{hs[0]: b[0], hs[1]: early(1), hs[2]: early(2)}}
	bad := serve(t, pitEngine(t, m, shifted), 1, p, "")
	badGap, badTokens := logitGap(bad, want)
	assert.Equal(t, 3*pitBlock, bad.Cached, "the bug counts three blocks promoted")
	assert.Positive(t, badGap, "and attention reads them at the wrong positions")

	gapped := &heldTier{blocks: map[kvevents.Hash]kvcache.TierBlock{hs[0]: b[0], hs[2]: b[2], hs[3]: b[3]}}
	got := serve(t, pitEngine(t, m, gapped), 1, p, "")
	gap, tokens := logitGap(got, want)
	assert.Equal(t, []int{pitBlock}, got.Promoted, "block 0 only: block 1 is the gap")
	assert.Zero(t, gap)
	t.Logf("with the bug (blocks 2 and 3 promoted past the missing block 1, one page early): %d of %d prompt tokens cached, logits off by %.3g, %d of %d tokens differ; fixed (promotion stops at the gap): %d promoted, logits off by %g, %d differ",
		bad.Cached, len(p), badGap, badTokens, len(want.Tokens), got.Promoted[0], gap, tokens)
}

// saltBlind is a tier keyed by a block's tokens alone: a lookup under any
// salt finds what was demoted under another. (It maps each salted hash of
// the test's prompt to the hash the blocks were stored under.)
type saltBlind struct {
	kvcache.Tier
	alias map[kvevents.Hash]kvevents.Hash
}

func (s saltBlind) key(h kvevents.Hash) kvevents.Hash {
	if a, ok := s.alias[h]; ok {
		return a
	}
	return h
}
func (s saltBlind) Has(h kvevents.Hash) bool                      { return s.Tier.Has(s.key(h)) }
func (s saltBlind) Get(h kvevents.Hash) (kvcache.TierBlock, bool) { return s.Tier.Get(s.key(h)) }

// TestPitfallTierKeyedWithoutTheSalt: tenant A's prompt is demoted under
// its cache salt. A tier that keys blocks by their tokens hands them to
// tenant B, whose time to first token then tells it that A sent the
// prompt: the side channel that salts close in the pool reopens under it.
// The pool names a block in a tier by its chained hash, whose first block
// carries the salt.
func TestPitfallTierKeyedWithoutTheSalt(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	p := pitPrompt(5)
	ram := demoted(t, m, p, "tenant-a")
	alias := map[kvevents.Hash]kvevents.Hash{}
	a := kvevents.BlockHashes(p, pitBlock, "tenant-a")
	for i, h := range kvevents.BlockHashes(p, pitBlock, "tenant-b") {
		alias[h] = a[i]
	}
	bad := serve(t, pitEngine(t, m, saltBlind{ram, alias}), 1, p, "tenant-b")
	assert.Equal(t, 4*pitBlock, bad.Cached, "with the bug, tenant B finds tenant A's blocks")

	// Each on a fresh engine, whose first promotion the cost rule cannot
	// skip (it has measured nothing yet): what is found is the tier's doing.
	b := serve(t, pitEngine(t, m, ram), 1, p, "tenant-b")
	own := serve(t, pitEngine(t, m, ram), 2, p, "tenant-a")
	assert.Zero(t, b.Cached, "tenant B finds nothing")
	assert.Equal(t, 4*pitBlock, own.Cached, "tenant A finds its own blocks")
	t.Logf("with the bug (a tier keyed by tokens alone): tenant B finds %d of %d prompt tokens tenant A sent; fixed (keyed by the chained hash, the salt in the first block): tenant B finds %d, tenant A %d",
		bad.Cached, len(p), b.Cached, own.Cached)
}

// loadModel writes the small model of seed into dir and loads it.
func loadModel(t *testing.T, dir string, seed int64) *model.Model {
	t.Helper()
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, seed)))
	m, err := model.Load(dir, cpu.New())
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

// diskIdentity is the identity of a pool of the pitfall engines' shape
// over m, naming its weights by fingerprint.
func diskIdentity(m *model.Model, fingerprint string) cachefile.Identity {
	return cachefile.Identity{Model: fingerprint, BlockSize: pitBlock, Layers: m.Config.NumHiddenLayers, KVDim: m.Config.KVDim(), DType: "float32"}
}

func openDisk(t *testing.T, dir string, id cachefile.Identity) *cachefile.DiskTier {
	t.Helper()
	d, err := cachefile.OpenDiskTier(cachefile.DiskTierConfig{Dir: dir, Capacity: 64 << 20, Identity: id, Seed: kvevents.DefaultHashSeed})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// fillDisk serves p on m over a disk tier of id in dir, evicts it into the
// tier and closes the tier, as a server that stops does.
func fillDisk(t *testing.T, m *model.Model, dir string, id cachefile.Identity, p []int32) {
	t.Helper()
	d := openDisk(t, dir, id)
	e := pitEngine(t, m, d)
	serve(t, e, 1, p, "")
	evictAll(t, e)
	require.NoError(t, d.Close())
	for i, h := range kvevents.BlockHashes(p, pitBlock, "") {
		require.True(t, d.Has(h), "block %d of the prompt is on the disk", i)
	}
}

// TestPitfallStaleTierAfterTheModelChanged: a server stored a prompt's
// blocks on its disk tier, and restarts on other weights of the same
// shape. A block's hash names its tokens, not the weights, so the new
// server asks for the very hashes the old one stored; a tier whose
// identity does not name the weights answers, and promotes KV the new
// model never computed. The identity names the weights by fingerprint
// (cachefile.ModelFingerprint), and each identity keeps its blocks in a
// subdirectory of its own: the new server finds nothing and computes.
func TestPitfallStaleTierAfterTheModelChanged(t *testing.T) {
	root := t.TempDir()
	oldDir, newDir := filepath.Join(root, "old"), filepath.Join(root, "new")
	old, cur := loadModel(t, oldDir, 7), loadModel(t, newDir, 8)
	p := pitPrompt(3)
	want := serve(t, pitEngine(t, cur), 1, p, "")

	blind := t.TempDir() // identities that say "llama" for both checkpoints
	fillDisk(t, old, blind, diskIdentity(old, "llama"), p)
	bad := serve(t, pitEngine(t, cur, openDisk(t, blind, diskIdentity(cur, "llama"))), 1, p, "")
	badGap, badTokens := logitGap(bad, want)
	assert.Equal(t, 4*pitBlock, bad.Cached, "with the bug the new model promotes the old one's KV")
	assert.Positive(t, badGap)

	dir := t.TempDir()
	oldFP, err := cachefile.ModelFingerprint(oldDir)
	require.NoError(t, err)
	newFP, err := cachefile.ModelFingerprint(newDir)
	require.NoError(t, err)
	require.NotEqual(t, oldFP, newFP)
	fillDisk(t, old, dir, diskIdentity(old, oldFP), p)
	disk := openDisk(t, dir, diskIdentity(cur, newFP))
	got := serve(t, pitEngine(t, cur, disk), 1, p, "")
	gap, _ := logitGap(got, want)
	assert.Zero(t, got.Cached, "the new model finds nothing")
	assert.Zero(t, gap)
	assert.Zero(t, disk.Stats().Corrupt, "and refuses nothing: it never opens the old model's files")
	t.Logf("with the bug (an identity that names the architecture, not the weights): the new model promotes %d of %d prompt tokens of the old one's KV, logits off by %.3g, %d of %d tokens differ; fixed (the weights' fingerprint, a subdirectory per identity): %d promoted, logits off by %g, %d files refused",
		bad.Cached, len(p), badGap, badTokens, len(want.Tokens), got.Cached, gap, disk.Stats().Corrupt)
}

// trusting is what a reader that trusts a block file's length makes of
// the file at path: the record's tokens, and as much KV as the file holds,
// the rest read as zeros, with a checksum computed over that.
func trusting(t *testing.T, path string, id cachefile.Identity, h kvevents.Hash, parent *kvevents.Hash) kvcache.TierBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	rec := cachefile.LeadBytes + int(binary.LittleEndian.Uint32(raw[len(cachefile.Magic):]))
	tokens := make([]int32, id.BlockSize)
	for j := range tokens {
		tokens[j] = int32(binary.LittleEndian.Uint32(raw[rec+65+4*j:]))
	}
	kv := make([]byte, id.KVBytes())
	copy(kv, raw[min(rec+id.HeadBytes(), len(raw)):])
	return kvcache.TierBlock{Hash: h, Parent: parent, Tokens: tokens, KV: kv, Sum: kvcache.TierSum(kv)}
}

// TestPitfallTornDiskRecord: a writer that wrote a block's file in place
// and died half way would leave a torn record under the block's name, and
// a reader that trusts the file's length promotes half a block of KV and
// half of zeros. The disk tier writes to a temporary name, syncs and
// renames (so its own files are whole: common/cachefile/disktier_torn_test.go
// cuts a real write short), removes the temporary files a crash left when
// it opens, and checks every file's size, identity, hash and SHA-256
// trailer: a torn file is set aside, never promoted, and promotion stops
// before it.
func TestPitfallTornDiskRecord(t *testing.T) {
	mdir := filepath.Join(t.TempDir(), "model")
	m := loadModel(t, mdir, 7)
	fp, err := cachefile.ModelFingerprint(mdir)
	require.NoError(t, err)
	id := diskIdentity(m, fp)
	p := pitPrompt(3)
	want := serve(t, pitEngine(t, m), 1, p, "")
	dir := t.TempDir()
	fillDisk(t, m, dir, id, p)

	hs := kvevents.BlockHashes(p, pitBlock, "")
	sub := filepath.Join(dir, cachefile.IdentityDir(id, kvevents.DefaultHashSeed))
	path := func(i int) string { return filepath.Join(sub, hex.EncodeToString(hs[i][:])+cachefile.BlockExt) }
	st, err := os.Stat(path(1))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path(1), st.Size()/2)) // block 1's file, torn half way

	naive := &heldTier{blocks: map[kvevents.Hash]kvcache.TierBlock{}}
	for i, h := range hs {
		var parent *kvevents.Hash
		if i > 0 {
			parent = &hs[i-1]
		}
		naive.blocks[h] = trusting(t, path(i), id, h, parent)
	}
	bad := serve(t, pitEngine(t, m, naive), 1, p, "")
	badGap, badTokens := logitGap(bad, want)
	assert.Equal(t, 4*pitBlock, bad.Cached)
	assert.Positive(t, badGap, "with the bug, half of block 1's KV is zeros")

	disk := openDisk(t, dir, id)
	got := serve(t, pitEngine(t, m, disk), 1, p, "")
	gap, _ := logitGap(got, want)
	assert.Equal(t, 1, disk.Stats().Corrupt, "the torn file is refused")
	assert.Len(t, disk.SetAside(), 1, "and set aside, not deleted")
	assert.Equal(t, []int{pitBlock}, got.Promoted, "block 0 only: promotion stops before the torn block")
	assert.Zero(t, gap)
	t.Logf("with the bug (a reader that trusts a torn block file, its missing KV read as zeros): %d of %d prompt tokens promoted, logits off by %.3g, %d of %d tokens differ; fixed (DiskTier checks size and SHA-256): %d file refused and set aside, %d tokens promoted, logits off by %g",
		bad.Cached, len(p), badGap, badTokens, len(want.Tokens), disk.Stats().Corrupt, got.Promoted[0], gap)
}

// TestPitfallATierReusedAcrossRuns: an experiment that compares runs must
// start each one cold. A RAM tier kept from one run to the next (the same
// tier under a fresh engine) hands the second run the blocks the first
// demoted: the first time the second run sends a prompt, it finds it
// cached, where the unbounded pool, the most any pool can find, finds
// nothing. phase09_tiers builds each row's tiers when its run starts
// (tierSetup in common/cli/tiers_experiment.go), and
// TestTiersExperimentClaims holds every design's RAM row to the unbounded
// pool's hit rate.
func TestPitfallATierReusedAcrossRuns(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	p := pitPrompt(3)
	firstVisit := func(e *engine.Engine) int {
		n := serve(t, e, 1, p, "").Cached
		evictAll(t, e)
		return n
	}
	unbounded := firstVisit(poolEngine(t, m, 1024, true))
	kept := kvcache.NewRAMTier(64<<20, nil)
	first := firstVisit(pitEngine(t, m, kept))
	second := firstVisit(pitEngine(t, m, kept))
	assert.Greater(t, second, unbounded, "with the bug the second run finds more than any pool could")

	fresh := firstVisit(pitEngine(t, m, kvcache.NewRAMTier(64<<20, nil)))
	assert.Equal(t, unbounded, fresh)
	assert.Equal(t, first, fresh)
	t.Logf("with the bug (one RAM tier under two runs): the second run's first request finds %d of %d prompt tokens cached, the unbounded pool's %d; fixed (a tier built for each run): %d",
		second, len(p), unbounded, fresh)
}
