package engine

import "kvlab/common/kvcache/misses"

// Request is one generation job submitted to the engine.
type Request struct {
	// ID names the request in outputs; it must be unique among live requests.
	ID int
	// Prompt is the token ids to continue.
	Prompt []int32
	// MaxTokens is the number of tokens to generate (> 0). Generation also
	// stops at the context limit, and at an end-of-sequence token unless
	// IgnoreEOS is set.
	MaxTokens int
	// Sampling chooses the next token from the logits.
	Sampling Sampling
	// IgnoreEOS keeps generating past end-of-sequence tokens, as serving
	// benchmarks do to get the output lengths they asked for.
	IgnoreEOS bool
	// KeepLogits attaches each sampled position's logits to its Output
	// (tests compare them bit for bit).
	KeepLogits bool
	// N is the number of samples to draw (0 means 1). The samples share
	// the prompt's KV blocks — even the partially filled last one — and
	// diverge at their first token; sample i uses seed Sampling.Seed+i, so
	// it equals a single-sample request with that seed.
	N int
	// CacheSalt names the tenant whose prefix cache the request may use
	// (the cache_salt of vLLM's API). The request reuses only KV committed
	// by requests with the same salt, and its own KV is cached under it, so
	// no tenant's time to first token reveals another's prompts. "" is the
	// shared cache of unsalted requests.
	CacheSalt string
	// TopProbs, when positive, attaches to each Output the probability of
	// its token and of the TopProbs most probable tokens at that position
	// (at most MaxTopProbs), for llama-server's n_probs and OpenAI's
	// logprobs.
	TopProbs int
	// PostSamplingProbs makes those probabilities the sampler's own, after
	// logit bias, temperature and top-p (Sampling.SampledProbs), instead of
	// the model's raw softmax.
	PostSamplingProbs bool
	// Constraint, when set, restricts every sampled token to those it
	// allows (structured output: a grammar). Before each draw the logits
	// of the tokens it forbids are set to -Inf, end-of-sequence tokens only
	// while it can end; then temperature, top-k and top-p act on what is
	// left. The engine owns it from Submit (and gives each of N samples a
	// Clone). The raw TopProbs stay the model's softmax, before the mask;
	// PostSamplingProbs are after it, as llama-server reports n_probs
	// with a grammar.
	Constraint Constraint
}

// samples returns the number of samples r asks for.
func (r Request) samples() int { return max(r.N, 1) }

// Output is one event of a request's output stream.
type Output struct {
	ID int
	// Sample is which of the request's N samples this event belongs to.
	Sample int
	// Token is the generated token; valid when Err is nil.
	Token int32
	// Index is the token's position in the output (0 for the first).
	Index int
	// Done marks the request's last event.
	Done bool
	// Reason says why a request finished: "length" (max tokens or context
	// full), "eos", or "error".
	Reason string
	// Err is set when the request failed; the event then carries no token.
	Err error
	// Logits are the logits Token was sampled from, if KeepLogits was set.
	Logits []float32
	// Prob and Top are Token's probability and the most probable tokens at
	// its position, most probable first, when Request.TopProbs asked.
	Prob float32
	Top  []TokenProb
	// Cached is the number of prompt tokens whose KV the request found in
	// the prefix cache at its first admission. A readmission after
	// preemption may find the request's own earlier blocks again; that is
	// recompute saved, not a hit, and is not reported here.
	Cached int
	// Promoted is, per cache tier (Config.Tiers, in order), how many of
	// the Cached tokens were copied back from it; the rest were in the
	// pool. Nil without tiers.
	Promoted []int
	// Misses says why each of the prompt's other tokens was computed:
	// Cold, Evicted, Salt and Partial sum to len(Prompt) - Cached;
	// Preempted counts the tokens computed again after preemptions, on
	// top of them. Zero without a prefix cache: nothing could be reused.
	Misses misses.Reasons
}

// phase is where a request is in its life.
type phase int

const (
	waiting  phase = iota // queued, holds no KV blocks
	prefill               // admitted; prompt (or recompute) KV being written
	decoding              // generating one token per step
	finished              // done; resources returned
)

func (p phase) String() string {
	return [...]string{"waiting", "prefill", "decode", "finished"}[p]
}

// sequence is the engine's state for one request.
type sequence struct {
	req Request
	// key names the sequence in the KV pool; unique over the engine's life
	// (a request with N samples has N sequences).
	key int
	// sample is this sequence's index among its request's samples.
	sample int
	// forked is set once the prompt's samples have been split off.
	forked bool
	// tokens is the prompt followed by every generated token.
	tokens []int32
	// computed counts the leading tokens whose KV is in the pool. While
	// prefilling it grows by chunks; while decoding it is len(tokens)-1:
	// the newest token is the next step's input.
	computed int
	// cached counts prompt tokens whose KV came from the prefix cache at
	// the latest admission (it decides which rows are not written again).
	cached int
	// firstCached is cached at the first admission: what the client is
	// told it found (Output.Cached); firstPromoted is how many of those
	// tokens each cache tier gave (Output.Promoted).
	firstCached   int
	firstPromoted []int
	misses        misses.Reasons // Output.Misses
	// missKeys are the prompt's block keys from its first admission, kept
	// until the prompt is committed and the ledger stores them; nil after.
	missKeys []misses.Key
	phase    phase
	// admitted orders running sequences: preemption picks the youngest.
	admitted int
	// preempted counts how often the sequence lost its KV to preemption.
	preempted int
	// con is the sample's own constraint state (nil: unconstrained).
	con Constraint
	// queued is the engine step count when the request was submitted:
	// longest-prefix-first's starvation guard measures the wait from it.
	queued int
}

func (s *sequence) generated() int { return len(s.tokens) - len(s.req.Prompt) }
