package cli

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model"
)

// tierFlags are -cache-ram, -cache-disk and -cache-disk-size: the cache
// tiers under the prefix cache (kvcache.Tier), which keep the KV blocks
// the pool's cache evicts and give them back to a prompt that starts with
// them. serve, bench, generate and logits take them; the comparisons of
// phase08 and chunking do not, since each of their engines is a setting
// held fixed.
type tierFlags struct {
	ramMiB     int
	disk       string
	diskMiB    int
	registered bool // a command without the flags has nothing to check
}

// defaultDiskMiB is -cache-disk-size's default: 10 GiB, a size most
// disks spare, and more than a pool and a host tier of the sizes this
// repository runs write at a shutdown.
const defaultDiskMiB = 10240

// tierFlushWait bounds how long a shutdown waits for the disk tier's
// writer (DiskTierConfig.FlushWait): a shutdown writes the whole pool and
// host tier at once, more than a running server ever queues.
const tierFlushWait = time.Minute

func (f *tierFlags) register(fs *flag.FlagSet) {
	f.registered = true
	fs.IntVar(&f.ramMiB, "cache-ram", 0, "llama-server's host-memory cache, in MiB: a tier under the prefix cache that keeps the KV blocks it evicts, least recently used out first, and copies them back for a prompt that starts with them (0: off). llama-server's default is 8192; here it is 0, because the KV pool's prefix cache is the cache of record and a host-memory copy an opt-in. Needs the prefix cache")
	fs.StringVar(&f.disk, "cache-disk", "", "a tier on this directory under the prefix cache (under -cache-ram's when both are given): one file per KV block, in a subdirectory named by the model, the KV's shape and dtype and how blocks are hashed; at exit the cache is written there, so the next start on it finds the cache warm. Needs the prefix cache")
	fs.IntVar(&f.diskMiB, "cache-disk-size", defaultDiskMiB, "with -cache-disk, the most MiB its block files take; beyond, the least recently used go")
}

// on reports whether any tier was asked for.
func (f *tierFlags) on() bool { return f.ramMiB != 0 || f.disk != "" }

// verb is one or many, as one or both tier flags were given.
func (f *tierFlags) verb(one, many string) string {
	if f.ramMiB != 0 && f.disk != "" {
		return many
	}
	return one
}

// names is the tier flags given, for an error message.
func (f *tierFlags) names() string {
	var n []string
	if f.ramMiB != 0 {
		n = append(n, "-cache-ram")
	}
	if f.disk != "" {
		n = append(n, "-cache-disk")
	}
	return strings.Join(n, " and ")
}

// check refuses, before anything is loaded, sizes the tiers cannot have
// and tiers without a prefix cache. cached says whether the run has one;
// turnOn says how to turn it on ("-prefix-caching", "drop -no-cache").
func (f *tierFlags) check(cached bool, turnOn string) error {
	if !f.registered {
		return nil
	}
	switch {
	case f.ramMiB < 0:
		return fmt.Errorf("-cache-ram must be ≥ 0 MiB (0: off), have %d: llama-server's -1, no limit, is not offered, a host-memory tier needs a budget", f.ramMiB)
	case f.diskMiB <= 0:
		return fmt.Errorf("-cache-disk-size must be > 0 MiB, have %d: a disk tier of no bytes keeps nothing (leave -cache-disk out for none)", f.diskMiB)
	case f.on() && !cached:
		return fmt.Errorf("%s %s the prefix cache (%s): a tier keeps the blocks the prefix cache evicts, and without one nothing is cached", f.names(), f.verb("needs", "need"), turnOn)
	}
	if limit := memoryLimit(); limit > 0 && int64(f.ramMiB)<<20 > limit {
		return fmt.Errorf("-cache-ram %d: more than half of this machine's %s of memory", f.ramMiB, byteSize(2*limit))
	}
	return nil
}

// tierSet is one engine's tiers as the flags built them: the host-memory
// tier, the disk tier, or the first over the second.
type tierSet struct {
	ram  *kvcache.RAMTier
	disk *cachefile.DiskTier
	// id and seed are what the disk tier names its blocks by; the pool's
	// must be the same (verify).
	id   cachefile.Identity
	seed string
	log  io.Writer
	who  string // the log lines' prefix: "phase08_prefix serve"
	done bool
}

// open builds the tiers the flags ask for, for the engine cfg describes
// of the model in modelDir, whose pool will name blocks with h. It sets
// cfg.Tiers and returns nil when no tier is asked for or cfg has no
// prefix cache. Call verify once the engine (and the observer that uses
// h) exists, and shutdown before the engine closes; release closes a disk
// tier that shutdown never reached.
func (f *tierFlags) open(cfg *engine.Config, modelDir string, mc *model.Config, h kvevents.Hasher, log io.Writer, who string) (*tierSet, error) {
	if !f.on() || cfg.PrefixCache == nil {
		return nil, nil
	}
	ts := &tierSet{log: log, who: who}
	if f.disk != "" {
		fp, err := cachefile.ModelFingerprint(modelDir)
		if err != nil {
			return nil, fmt.Errorf("-cache-disk: identifying the model: %w", err)
		}
		ts.id = cachefile.Identity{Model: fp, BlockSize: cfg.BlockSize, Layers: mc.NumHiddenLayers, KVDim: mc.KVDim(),
			DType: cfg.KVCacheDType.Name(), HashAlgo: h.Algo(), LoRA: h.LoRA()}
		ts.seed = h.Seed()
		// A shutdown puts the whole pool and the host tier into the
		// writer's queue at once (FlushTiers, Drain): the queue holds that
		// many blocks, or the rest would be dropped and the next start
		// find them missing.
		blocks := cfg.NumBlocks
		if f.ramMiB > 0 {
			blocks += int((int64(f.ramMiB) << 20) / int64(ts.id.KVBytes()+4*ts.id.BlockSize)) // a TierBlock's Size
		}
		blocks = max(blocks, cachefile.DefaultQueueBlocks)
		disk, err := cachefile.OpenDiskTier(cachefile.DiskTierConfig{
			Dir: f.disk, Capacity: int64(f.diskMiB) << 20, Identity: ts.id, Seed: ts.seed,
			QueueBlocks: blocks, QueueBytes: int64(blocks) * blockFileBytes(ts.id, ts.seed), FlushWait: tierFlushWait,
		})
		if err != nil {
			return nil, fmt.Errorf("-cache-disk: %w", err)
		}
		ts.disk = disk
	}
	if f.ramMiB > 0 {
		var next kvcache.Tier
		if ts.disk != nil {
			next = ts.disk
		}
		ts.ram = kvcache.NewRAMTier(int64(f.ramMiB)<<20, next)
	}
	cfg.Tiers = ts.tiers()
	remember(ts)
	return ts, nil
}

// blockFileBytes is the size of every block file of a disk tier of id and
// seed: the lead and header, one record, the checksum.
func blockFileBytes(id cachefile.Identity, seed string) int64 {
	hdr, _ := cachefile.MarshalHeader(id, seed, 1) // of strings and numbers: it never fails
	return int64(len(cachefile.AppendLead(nil, len(hdr))) + len(hdr) + id.RecordBytes() + sha256.Size)
}

// tiers is the set, fastest first: what the engine is given.
func (ts *tierSet) tiers() []kvcache.Tier {
	var out []kvcache.Tier
	if ts.ram != nil {
		out = append(out, ts.ram)
	}
	if ts.disk != nil {
		out = append(out, ts.disk)
	}
	return out
}

// describe is the tiers in one phrase for the start's log line.
func (ts *tierSet) describe() string {
	var parts []string
	if ts.ram != nil {
		parts = append(parts, fmt.Sprintf("CPU of %d MiB", ts.ram.Stats().Capacity>>20))
	}
	if ts.disk != nil {
		s := ts.disk.Stats()
		parts = append(parts, fmt.Sprintf("DISK of %d MiB in %s, %d blocks there", s.Capacity>>20, ts.disk.Dir(), s.Blocks))
	}
	return strings.Join(parts, " over ")
}

// verify checks that the pool names and shapes blocks as the disk tier
// does — the identity a --cache-dir file of this pool would carry, and
// its observer's seed — so that a restart looks in the subdirectory the
// last run wrote. It logs what the tiers are.
func (ts *tierSet) verify(pool *kvcache.Pool) error {
	if ts == nil {
		return nil
	}
	if ts.disk != nil {
		obs := pool.Observer() // AttachTiers made one, if nothing else did
		if obs == nil {
			return errors.New("-cache-disk: the pool names no blocks")
		}
		h := obs.Hasher()
		if got := cacheIdentity(ts.id.Model, pool, h); got != ts.id || h.Seed() != ts.seed {
			return fmt.Errorf("-cache-disk: the pool's blocks are %+v under seed %q, the disk tier's %+v under %q", got, h.Seed(), ts.id, ts.seed)
		}
	}
	fmt.Fprintf(ts.log, "%s: cache tiers under the prefix cache: %s\n", ts.who, ts.describe())
	return nil
}

// shutdown leaves what the engine cached on the disk tier for the next
// start, once the engine has stopped and before it closes: the pool's
// blocks go into the first tier (FlushTiers), the host tier's down to the
// disk (Drain), and the disk tier's writer finishes, within tierFlushWait
// (Close). Without a disk tier nothing outlives the process and nothing
// is copied. It logs one line, and returns an error when blocks were
// left unwritten: the writer failed them, or did not finish in time.
func (ts *tierSet) shutdown(pool *kvcache.Pool) error {
	if ts == nil || ts.done {
		return nil
	}
	ts.done = true
	forget(ts)
	if ts.disk == nil {
		s := ts.ram.Stats()
		fmt.Fprintf(ts.log, "%s: cache tiers: CPU held %d KV blocks (%s), which end with the process (-cache-disk keeps a cache for the next start)\n", ts.who, s.Blocks, byteSize(s.Bytes))
		return nil
	}
	before := ts.disk.Stats().Dropped
	flushed := pool.FlushTiers()
	moved := fmt.Sprintf("flushed %d KV blocks from the pool into DISK", flushed)
	if ts.ram != nil {
		// The first tier is host memory: Drain takes it down.
		moved = fmt.Sprintf("flushed %d KV blocks from the pool into CPU, drained %d from CPU to DISK", flushed, ts.ram.Stats().Blocks)
		ts.ram.Drain()
	}
	// A Put refuses at once what the disk tier never stores (a salted
	// block, one over a full queue); what it drops after that, its writer
	// failed to write (or Close gave up on).
	queued := ts.disk.Stats().Dropped
	err := ts.disk.Close()
	s := ts.disk.Stats()
	failed := s.Dropped - queued
	fmt.Fprintf(ts.log, "%s: cache tiers: %s; DISK holds %d blocks (%s) in %s; at shutdown %d refused (salted, or over the queue), %d failed to write\n",
		ts.who, moved, s.Blocks, byteSize(s.Bytes), ts.disk.Dir(), queued-before, failed)
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d KV blocks could not be written to %s", failed, ts.disk.Dir())
	}
	if err != nil {
		return fmt.Errorf("flushing the cache tiers: %w", err)
	}
	return nil
}

// release closes the disk tier of a run that ends before shutdown (an
// error on the way), keeping what it wrote; nil and shut-down sets do
// nothing.
func (ts *tierSet) release() {
	if ts == nil || ts.done {
		return
	}
	ts.done = true
	forget(ts)
	if ts.disk != nil {
		_ = ts.disk.Close()
	}
}

// opened maps a tier set's first tier to the set, so that benchOne, which
// is handed only an engine.Config, shuts down the tiers the flags built
// and no others.
var opened sync.Map

func remember(ts *tierSet) { opened.Store(ts.tiers()[0], ts) }
func forget(ts *tierSet)   { opened.Delete(ts.tiers()[0]) }

// tierSetOf returns the set the flags built whose tiers are tiers, or nil.
func tierSetOf(tiers []kvcache.Tier) *tierSet {
	if len(tiers) == 0 {
		return nil
	}
	ts, ok := opened.Load(tiers[0])
	if !ok {
		return nil
	}
	return ts.(*tierSet)
}

// tierHasher is how the pool of a runnable without serve's hash flags
// names blocks: the observer AttachTiers makes, vLLM's sha256_cbor under
// the default seed, so that a disk tier filled by bench or generate is
// found by a serve of the default flags, and the other way round.
var tierHasher = kvevents.NewHasher(kvevents.SHA256CBOR, kvevents.DefaultHashSeed, "")

// checkTiers is check for the commands with -no-cache: the tiers need the
// variant's prefix cache on.
func (f *runtimeFlags) checkTiers(v Variant) error {
	return f.tiers.check(v.PrefixCache != nil && !f.noCache, "drop -no-cache")
}

// cachedFrom says where a prompt's cached tokens came from: the pool
// ("GPU", as vLLM names it, and as usage's cached_tokens_by_tier does) and
// each tier, promoted per tier in the engine's order.
func (ts *tierSet) cachedFrom(cached int, promoted []int) string {
	pool := cached
	parts := []string{}
	for i, t := range ts.tiers() {
		n := 0
		if i < len(promoted) {
			n = promoted[i]
		}
		pool -= n
		parts = append(parts, fmt.Sprintf("%d from %s", n, t.Name()))
	}
	return fmt.Sprintf("the prompt found %d tokens cached: %d in the pool (GPU), %s", cached, pool, strings.Join(parts, ", "))
}

// cacheIdentity is what a cache of pool's blocks is matched by: the model
// fingerprint fp, the pool's block size, layers, KV width and dtype, and
// how h names blocks.
func cacheIdentity(fp string, pool *kvcache.Pool, h kvevents.Hasher) cachefile.Identity {
	return cachefile.Identity{Model: fp, BlockSize: pool.BlockSize(), Layers: pool.Layers(), KVDim: pool.KVDim(),
		DType: pool.DType().Name(), HashAlgo: h.Algo(), LoRA: h.LoRA()}
}
