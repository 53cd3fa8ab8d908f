package metrics

import "time"

// Summary is the reduction of a Run to the numbers compared across
// configurations.
//
// Latency statistics cover completed requests only: a failed request has no
// meaningful end-to-end latency, and mixing it in would reward an engine for
// failing fast. Throughput counts every produced token, failed requests'
// included, because the engine did that work.
type Summary struct {
	Name      string `json:"name"`
	Requests  int    `json:"requests"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`

	// TTFT is FirstToken - Arrival.
	TTFT Stats `json:"ttft"`
	// ITL pools the gaps between consecutive tokens of every request, so a
	// long request weighs more than a short one, as it does for a user
	// watching tokens stream.
	ITL Stats `json:"itl"`
	// E2E is Finish - Arrival.
	E2E Stats `json:"e2e"`

	OutputTokens int `json:"output_tokens"`
	// OutputTokensPerSec is OutputTokens / Wall.
	OutputTokensPerSec float64 `json:"output_tokens_per_sec"`
	// RequestsPerSec is Completed / Wall.
	RequestsPerSec float64 `json:"requests_per_sec"`

	PromptTokens int `json:"prompt_tokens"`
	CachedTokens int `json:"cached_tokens"`
	// HitRate is CachedTokens / PromptTokens in [0, 1], 0 without prompt
	// tokens: the fraction of prompt tokens the prefix cache saved.
	HitRate float64 `json:"hit_rate"`
	// PrefillTokensComputed is copied from EngineStats.
	PrefillTokensComputed int `json:"prefill_tokens_computed"`
	// OptimalPrefill is the fewest prefill tokens a block-aligned prefix
	// cache could have computed on these requests (see OptimalPrefill).
	OptimalPrefill int `json:"optimal_prefill"`
	// Evictions, BlockCopies and PeakBlocks are copied from EngineStats.
	Evictions   int `json:"evictions"`
	BlockCopies int `json:"block_copies"`
	PeakBlocks  int `json:"peak_blocks"`
	// MaxRunning and Preemptions are copied from EngineStats.
	MaxRunning  int `json:"max_running"`
	Preemptions int `json:"preemptions"`

	Wall time.Duration `json:"wall_ns"`
}

// Summary reduces the run.
//
// Prompt and cached token counts each come from EngineStats when it reports
// a non-zero value (the engine knows its cache; the driver only knows what
// an engine chose to report per request), and otherwise from the
// per-request records. HitRate is clamped to 1, since an engine that counts
// cache hits again when it recomputes a preempted request can report more
// cached tokens than the prompts hold.
func (r *Run) Summary() Summary {
	s := Summary{Name: r.Name, Requests: len(r.Requests), Wall: r.Wall}
	var ttft, itl, e2e []time.Duration
	for _, q := range r.Requests {
		s.OutputTokens += q.OutputLen
		s.PromptTokens += q.PromptLen
		s.CachedTokens += q.CachedTokens
		if q.Failed() {
			s.Failed++
			continue
		}
		s.Completed++
		e2e = append(e2e, q.Finish-q.Arrival)
		if len(q.TokenTimes) > 0 {
			ttft = append(ttft, q.FirstToken-q.Arrival)
		}
		for i := 1; i < len(q.TokenTimes); i++ {
			itl = append(itl, q.TokenTimes[i]-q.TokenTimes[i-1])
		}
	}
	s.TTFT, s.ITL, s.E2E = NewStats(ttft), NewStats(itl), NewStats(e2e)

	if r.Engine.PromptTokens > 0 {
		s.PromptTokens = r.Engine.PromptTokens
	}
	if r.Engine.CachedTokens > 0 {
		s.CachedTokens = r.Engine.CachedTokens
	}
	if s.PromptTokens > 0 {
		s.HitRate = min(1, float64(s.CachedTokens)/float64(s.PromptTokens))
	}
	s.PrefillTokensComputed = r.Engine.PrefillTokensComputed
	s.Evictions = r.Engine.Evictions
	s.BlockCopies = r.Engine.BlockCopies
	s.PeakBlocks = r.Engine.PeakBlocksUsed
	s.MaxRunning = r.Engine.MaxRunning
	s.Preemptions = r.Engine.Preemptions
	if r.Engine.BlockSize > 0 {
		s.OptimalPrefill = OptimalPrefill(r.Requests, r.Engine.BlockSize)
	}

	if sec := r.Wall.Seconds(); sec > 0 {
		s.OutputTokensPerSec = float64(s.OutputTokens) / sec
		s.RequestsPerSec = float64(s.Completed) / sec
	}
	return s
}
