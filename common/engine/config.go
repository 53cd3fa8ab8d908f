package engine

import (
	"errors"
	"fmt"

	"kvlab/common/kvcache"
)

// Config holds the engine's settings. The zero value is not usable; start
// from DefaultConfig.
type Config struct {
	// BlockSize is the number of tokens per KV block.
	BlockSize int
	// NumBlocks is the size of the KV pool in blocks.
	NumBlocks int
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
	// Audit runs the pool's ownership audit after every step and panics on
	// the first violation. Tests turn it on; it costs O(blocks) per step.
	Audit bool
}

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

// DefaultConfig returns settings sized for the built-in synthetic model on a
// small CPU machine.
func DefaultConfig() Config {
	return Config{
		BlockSize:      16,
		NumBlocks:      1024,
		MaxBatchTokens: 512,
		MaxRunning:     64,
		ChunkedPrefill: true,
	}
}

// Validate reports settings the engine cannot run with. modelMaxPos is the
// model's max_position_embeddings.
func (c Config) Validate(modelMaxPos int) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.BlockSize <= 0 {
		bad("block size must be positive, have %d", c.BlockSize)
	}
	if c.NumBlocks <= 0 {
		bad("number of KV blocks must be positive, have %d", c.NumBlocks)
	}
	if c.MaxBatchTokens <= 0 {
		bad("max batch tokens must be positive, have %d", c.MaxBatchTokens)
	}
	if c.MaxRunning <= 0 {
		bad("max running sequences must be positive, have %d", c.MaxRunning)
	}
	if c.MaxContext < 0 {
		bad("max context must not be negative, have %d", c.MaxContext)
	}
	if c.MaxContext > modelMaxPos {
		bad("max context %d exceeds the model's max_position_embeddings %d", c.MaxContext, modelMaxPos)
	}
	ctx := c.context(modelMaxPos)
	if c.BlockSize > 0 && c.NumBlocks > 0 && c.NumBlocks*c.BlockSize < 2 {
		bad("KV pool of %d blocks × %d tokens cannot hold a prompt and one output token", c.NumBlocks, c.BlockSize)
	}
	if !c.ChunkedPrefill && c.MaxBatchTokens > 0 && c.MaxBatchTokens < ctx {
		bad("whole-prompt prefill needs max batch tokens (%d) ≥ max context (%d): a long prompt could never be scheduled; enable chunked prefill or raise the budget", c.MaxBatchTokens, ctx)
	}
	if c.Admission != AdmitConservative && c.Admission != AdmitCostAware {
		bad("unknown admission policy %d", c.Admission)
	}
	if c.PrefixCache != nil && !c.ChunkedPrefill {
		bad("a prefix cache requires chunked prefill: whole-prompt prefill attends only to the prompt's own tokens and would not see the cached prefix")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: invalid config: %w", err)
	}
	return nil
}

// context returns the effective context limit.
func (c Config) context(modelMaxPos int) int {
	if c.MaxContext > 0 {
		return c.MaxContext
	}
	return modelMaxPos
}
