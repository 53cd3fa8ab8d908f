package engine

import (
	"errors"
	"fmt"
	"io"

	"kvlab/common/kvcache"
	"kvlab/kernels"
)

// Config holds the engine's settings. The zero value is not usable; start
// from DefaultConfig.
type Config struct {
	// BlockSize is the number of tokens per KV block.
	BlockSize int
	// NumBlocks is the size of the KV pool in blocks.
	NumBlocks int
	// KVCacheDType is what the pool holds keys and values as: float32 (the
	// zero value and the default), or bfloat16 or float16, which halve the
	// pool's bytes per token and round every cached value once (see
	// kernels.KVDType). Greedy output then follows the float32 run closely
	// but not bit for bit; every "same output with and without X" property
	// still holds within one dtype.
	KVCacheDType kernels.KVDType
	// MaxBatchTokens is the per-step token budget: decodes plus prefill
	// chunks. It bounds the work (and so the latency) of one step.
	MaxBatchTokens int
	// MaxRunning caps the number of admitted sequences.
	MaxRunning int
	// MaxContext caps prompt plus output length; 0 means the model's limit.
	MaxContext int
	// ChunkedPrefill splits long prompts into chunks that fit the budget
	// next to running decodes, and attends through the paged cache. When
	// false, each prompt is prefilled whole in a step of its own, attending
	// only to its own tokens (the pre-phase-7 design; it cannot see a
	// cached prefix).
	ChunkedPrefill bool
	// Admission chooses how admission charges a prompt against free KV
	// capacity; see AdmitConservative and AdmitCostAware.
	Admission Admission
	// PrefixCache, when set, builds the prefix cache the KV pool consults.
	// Nil is the phase-7 baseline.
	PrefixCache func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache
	// Tiers are slower stores under the prefix cache, fastest first
	// (kvcache.AttachTiers): what it evicts is demoted into them, and a
	// prompt whose prefix they hold copies it back instead of computing
	// it. They need a prefix cache, and belong to one engine.
	Tiers []kvcache.Tier
	// TailBlocks, when > 0, has the pool keep the partial last blocks of
	// up to that many ended sequences (kvcache.Config.TailBlocks): a
	// prompt that repeats or continues one of them copies the block and
	// computes only what follows, not every token after the last whole
	// block. It needs a prefix cache. 0 (the default): only whole blocks
	// are reused, the rule each design teaches.
	TailBlocks int
	// TiersAlwaysPromote turns off the rule that skips a tier while
	// copying a block from it costs more than computing it
	// (kvcache.Pool.SetTierCostRule): for tests and experiments whose
	// counts must not depend on the machine's timing.
	TiersAlwaysPromote bool
	// Commit chooses when a prompt's KV is offered to the prefix cache:
	// after every prefill chunk (the default) or only once the whole prompt
	// is computed. See CommitEveryChunk.
	Commit CommitPolicy
	// WindowFree gives back a sliding-window layer's KV blocks once they
	// fall out of every window still to come (Gemma-3's local layers): the
	// local layers get a page table and a block storage of their own, and
	// only the global layers keep every block. Off by default. It cannot go
	// with a prefix cache, which would lend a finished sequence's blocks
	// to a new request whose local layers need KV that was given back.
	WindowFree bool
	// LocalBlocks sizes the local layers' storage under WindowFree, in
	// blocks; 0 means NumBlocks. A smaller storage is where the saving
	// becomes memory: a sequence holds about a window's worth of local
	// blocks, however long it grows.
	LocalBlocks int
	// Order chooses which waiting request admission tries first: arrival
	// order (the default) or the longest cached prefix first. See
	// OrderFCFS and OrderLongestPrefix.
	Order QueueOrder
	// MaxWaitSteps is longest-prefix-first's starvation guard: a request
	// that has waited this many engine steps is admitted before any
	// request ordered by its prefix, oldest first. 0 turns the guard off
	// (a request whose prefix is never cached can then wait forever).
	MaxWaitSteps int
	// Audit runs the pool's ownership audit after every step and panics on
	// the first violation. Tests turn it on; it costs O(blocks) per step.
	Audit bool
	// Trace, when set, is told every step's plan and every pool operation
	// (see Tracer). Nil is off.
	Trace Tracer
	// VerifyHits, when N > 0, recomputes one in N prefix-cache hits from
	// scratch off the engine's goroutine and compares the KV bit for bit
	// (verify.go); a block that differs is forgotten. 0 is off. It needs
	// a prefix cache.
	VerifyHits int
	// VerifyLog, when set, gets a line for every verification that
	// failed: request id, whether it was salted, the block and layer.
	VerifyLog io.Writer
}

// QueueOrder is the order in which admission tries waiting requests.
type QueueOrder int

const (
	// OrderFCFS admits in arrival order (preempted requests back at the
	// front): first come, first served.
	OrderFCFS QueueOrder = iota
	// OrderLongestPrefix admits the waiting request whose prompt has the
	// longest prefix in the prefix cache first, as SGLang's cache-aware
	// scheduling does: requests that reuse what is cached run while it is
	// cached, instead of waiting behind requests that would evict it.
	// Preempted requests, and requests that have waited MaxWaitSteps
	// steps, still go first (see admissionOrder).
	OrderLongestPrefix
)

// Admission is a policy for charging a new request against free capacity.
type Admission int

const (
	// AdmitConservative charges the whole prompt, even when part of it will
	// come from the prefix cache: safe, but it over-reserves.
	AdmitConservative Admission = iota
	// AdmitCostAware charges only the part of the prompt the prefix cache
	// does not already hold (prompt − matched).
	AdmitCostAware
)

// CommitPolicy says when a sequence's computed KV enters the prefix cache.
// Either way a finished sequence commits its prompt and output.
type CommitPolicy int

const (
	// CommitEveryChunk offers every finished prefill chunk: a request that
	// arrives while a long prompt is still being prefilled already reuses
	// its first blocks, instead of computing them a second time.
	CommitEveryChunk CommitPolicy = iota
	// CommitPromptEnd offers a prompt only when its last chunk is computed,
	// as a design that inserts "at prefill completion" does. Close arrivals
	// of a shared prefix then each compute it.
	CommitPromptEnd
)

// DefaultConfig returns settings sized for the built-in synthetic model on a
// small CPU machine.
func DefaultConfig() Config {
	return Config{
		BlockSize:      16,
		NumBlocks:      1024,
		MaxBatchTokens: 512,
		MaxRunning:     64,
		ChunkedPrefill: true,
		Admission:      AdmitCostAware, // what the runnables use; it equals conservative without a cache
	}
}

// ConfigError is one setting Validate refuses. Field names the Config
// field, so a front end can say which of its own flags to change.
type ConfigError struct {
	Field   string // e.g. "BlockSize"
	Problem string // e.g. "must be positive, have 0"
}

func (e *ConfigError) Error() string { return configWords[e.Field] + " " + e.Problem }

// configWords names each field in an error message.
var configWords = map[string]string{
	"BlockSize": "block size", "NumBlocks": "number of KV blocks", "MaxBatchTokens": "max batch tokens",
	"MaxRunning": "max running sequences", "MaxContext": "max context", "ChunkedPrefill": "chunked prefill",
	"Admission": "admission policy", "PrefixCache": "prefix cache", "Commit": "commit policy",
	"WindowFree": "freeing out-of-window blocks", "LocalBlocks": "local-layer blocks",
	"Order": "admission order", "MaxWaitSteps": "max wait steps",
	"KVCacheDType": "KV cache dtype", "Tiers": "cache tiers", "VerifyHits": "hit verification",
	"TailBlocks": "kept partial blocks",
}

// Validate reports settings the engine cannot run with. modelMaxPos is the
// model's max_position_embeddings. Each problem is a *ConfigError.
func (c Config) Validate(modelMaxPos int) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if c.BlockSize <= 0 {
		bad("BlockSize", "must be positive, have %d", c.BlockSize)
	}
	if c.NumBlocks <= 0 {
		bad("NumBlocks", "must be positive, have %d", c.NumBlocks)
	}
	if c.MaxBatchTokens <= 0 {
		bad("MaxBatchTokens", "must be positive, have %d", c.MaxBatchTokens)
	}
	if c.MaxRunning <= 0 {
		bad("MaxRunning", "must be positive, have %d", c.MaxRunning)
	}
	if c.MaxContext < 0 {
		bad("MaxContext", "must not be negative, have %d", c.MaxContext)
	}
	if c.MaxContext > modelMaxPos {
		bad("MaxContext", "%d exceeds the model's max_position_embeddings %d", c.MaxContext, modelMaxPos)
	}
	ctx := c.ContextLimit(modelMaxPos)
	if c.BlockSize > 0 && c.NumBlocks > 0 && c.NumBlocks*c.BlockSize < 2 {
		bad("NumBlocks", "%d of %d tokens cannot hold a prompt and one output token", c.NumBlocks, c.BlockSize)
	}
	if !c.ChunkedPrefill && c.MaxBatchTokens > 0 && c.MaxBatchTokens < ctx {
		bad("MaxBatchTokens", "(%d) must be ≥ the max context (%d) for whole-prompt prefill: a long prompt could never be scheduled; enable chunked prefill or raise the budget", c.MaxBatchTokens, ctx)
	}
	if c.Admission != AdmitConservative && c.Admission != AdmitCostAware {
		bad("Admission", "%d is unknown", c.Admission)
	}
	if c.Commit != CommitEveryChunk && c.Commit != CommitPromptEnd {
		bad("Commit", "%d is unknown", c.Commit)
	}
	if c.Order != OrderFCFS && c.Order != OrderLongestPrefix {
		bad("Order", "%d is unknown", c.Order)
	}
	if c.KVCacheDType != kernels.KVF32 && c.KVCacheDType != kernels.KVBF16 && c.KVCacheDType != kernels.KVF16 {
		bad("KVCacheDType", "%v is unknown (want f32, bf16 or f16)", c.KVCacheDType)
	}
	if c.MaxWaitSteps < 0 {
		bad("MaxWaitSteps", "must not be negative, have %d", c.MaxWaitSteps)
	}
	if c.PrefixCache != nil && !c.ChunkedPrefill {
		bad("ChunkedPrefill", "is off, but a prefix cache requires chunked prefill: whole-prompt prefill attends only to the prompt's own tokens and would not see the cached prefix")
	}
	if len(c.Tiers) > 0 && c.PrefixCache == nil {
		bad("Tiers", "need a prefix cache: without one nothing is cached, so nothing is evicted into them")
	}
	if c.TailBlocks < 0 || (c.TailBlocks > 0 && c.PrefixCache == nil) {
		bad("TailBlocks", "(%d) must be 0 (off), or positive with a prefix cache whose matches they continue", c.TailBlocks)
	}
	if c.VerifyHits < 0 || (c.VerifyHits > 0 && c.PrefixCache == nil) {
		bad("VerifyHits", "(%d) must be 0 (off), or positive with a prefix cache to verify", c.VerifyHits)
	}
	if c.WindowFree && c.PrefixCache != nil {
		bad("WindowFree", "cannot go with a prefix cache: a cached prefix's sliding-window layers would have given back the KV a new request needs; with a cache, every layer keeps every block")
	}
	if c.LocalBlocks < 0 || c.LocalBlocks > c.NumBlocks {
		bad("LocalBlocks", "must be in 0…%d (the number of KV blocks), have %d", c.NumBlocks, c.LocalBlocks)
	}
	if c.LocalBlocks > 0 && !c.WindowFree {
		bad("LocalBlocks", "(%d) sizes the local layers' storage, which exists only when out-of-window blocks are freed", c.LocalBlocks)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: invalid config: %w", err)
	}
	return nil
}

// PoolBytes returns the memory the KV pool takes for a model with layers
// layers and kvDim key (and value) features per token: K and V, each
// feature in KVCacheDType (4 bytes, or 2).
func (c Config) PoolBytes(layers, kvDim int) int64 {
	return 2 * int64(layers) * int64(c.NumBlocks) * int64(c.BlockSize) * int64(kvDim) * int64(c.KVCacheDType.Bytes())
}

// RunningSlots returns how many sequences may run at once: MaxRunning, but
// no more than MaxBatchTokens, since every running decode must fit in one
// step or the youngest would wait forever behind the oldest.
func (c Config) RunningSlots() int { return min(c.MaxRunning, c.MaxBatchTokens) }

// ContextLimit returns the effective context limit: MaxContext, or the
// model's modelMaxPos when MaxContext is 0.
func (c Config) ContextLimit(modelMaxPos int) int {
	if c.MaxContext > 0 {
		return c.MaxContext
	}
	return modelMaxPos
}
