package metrics

import "time"

// RequestRecord is what the driver observed for one request.
//
// Times are measured from the start of the run. Arrival is the scheduled
// arrival (or release, for a follow-up turn), not the moment the engine
// accepted the request: queueing inside the driver or the engine is part of
// the latency a user would see.
type RequestRecord struct {
	ID        int `json:"id"`
	PromptLen int `json:"prompt_len"`
	// OutputLen counts the tokens actually produced, which may be fewer than
	// asked for when the request failed part-way.
	OutputLen int `json:"output_len"`
	// CachedTokens is how many prompt tokens were served from the prefix
	// cache instead of being computed; 0 when the engine does not say.
	CachedTokens int           `json:"cached_tokens"`
	Arrival      time.Duration `json:"arrival_ns"`
	// FirstToken is zero when no token was produced.
	FirstToken time.Duration `json:"first_token_ns"`
	Finish     time.Duration `json:"finish_ns"`
	// TokenTimes holds one timestamp per produced token, in order.
	TokenTimes []time.Duration `json:"token_times_ns"`
	// Err is empty for a request that completed normally.
	Err string `json:"err,omitempty"`
	// Prompt and Output are the tokens in and out, kept so that runs of
	// different engines on the same arrivals can be compared token by token
	// and the block-aligned optimum computed (see OptimalPrefill).
	Prompt []int32 `json:"prompt,omitempty"`
	Output []int32 `json:"output,omitempty"`
}

// Failed reports whether the request ended with an error.
func (r RequestRecord) Failed() bool { return r.Err != "" }

// EngineStats are counters only the engine knows. The driver cannot see them
// through its narrow interface, so the caller fills them in after the run.
type EngineStats struct {
	Steps int `json:"steps"`
	// PrefillTokensComputed counts prompt tokens that went through the model,
	// including any recomputed after a preemption.
	PrefillTokensComputed int `json:"prefill_tokens_computed"`
	DecodeTokens          int `json:"decode_tokens"`
	// CachedTokens and PromptTokens give the engine's own view of the prefix
	// cache hit rate; see Summary for how they are used.
	CachedTokens   int `json:"cached_tokens"`
	PromptTokens   int `json:"prompt_tokens"`
	Evictions      int `json:"evictions"`
	BlockCopies    int `json:"block_copies"`
	PeakBlocksUsed int `json:"peak_blocks_used"`
	TotalBlocks    int `json:"total_blocks"`
	BlockSize      int `json:"block_size"`
	// MaxRunning is the largest number of requests in one batch.
	MaxRunning int `json:"max_running"`
	// Preemptions counts sequences whose KV was dropped to make room, to be
	// recomputed later.
	Preemptions int `json:"preemptions"`
	// MissTokens splits the prompt tokens computed, by why the prefix
	// cache did not give them (common/kvcache/misses' names: cold,
	// evicted, salt, partial, preempted); nil without a prefix cache.
	MissTokens map[string]int `json:"miss_tokens,omitempty"`
	// PromotedTokens is, per cache tier, how many cached prompt tokens
	// were copied back from it; nil without tiers.
	PromotedTokens []int `json:"promoted_tokens,omitempty"`
	// Ghosts are the hit rates on the run's own traffic of the real prefix
	// cache and of each rival eviction policy run beside it as a ghost
	// (common/kvcache/ghost), the real cache first; nil without ghosts.
	Ghosts []GhostRate `json:"ghosts,omitempty"`
}

// GhostRate is one cache's hits over the prompt tokens its lookups asked
// for, readmissions after a preemption included.
type GhostRate struct {
	Name    string  `json:"name"`
	Hits    int64   `json:"hit_tokens"`
	HitRate float64 `json:"hit_rate"`
}

// Run is one configuration's complete result.
type Run struct {
	Name     string          `json:"name"`
	Requests []RequestRecord `json:"requests"`
	Wall     time.Duration   `json:"wall_ns"`
	Engine   EngineStats     `json:"engine"`
}
