package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"kvlab/common/engine"
	"kvlab/common/grammar"
	"kvlab/common/kvcache/misses"
	"kvlab/common/kvevents"
	"kvlab/common/tokenizer"
)

// genRequest is a generation as every endpoint asks for it, once its own
// fields are decoded and checked.
type genRequest struct {
	prompt    []int32
	maxTokens int
	// maxParam names the field that set maxTokens ("max_tokens",
	// "max_completion_tokens"); "" when maxTokens is the endpoint's
	// default, which is then cut to what the context leaves.
	maxParam  string
	sampling  engine.Sampling
	n         int
	ignoreEOS bool
	stop      []string // stop strings; the text stops before the first one found
	cacheSalt string   // the tenant's cache salt, "" for none
	topProbs  int      // probabilities to report per token (n_probs), 0 for none
	// postSampling reports the sampler's probabilities, not the model's
	// (post_sampling_probs).
	postSampling bool
	// slot is the llama-server slot asked for, -1 to let the server
	// choose (slots.go); settings are what /slots shows for it.
	slot     int
	settings generationSettings
	// responseFields are /completion's response_fields: the paths of the
	// final answer to keep (responsefields.go); none keeps it whole.
	responseFields []string
	// timingsPerToken puts the request's timings so far on every piece,
	// not only on a sample's last (llama-server's timings_per_token).
	timingsPerToken bool
	// grammar constrains every sample's text (structured.go); nil: free.
	// grammarSrc is its GBNF (a schema's after conversion), for /slots
	// and generation_settings; grammarField the request field that asked
	// for it (grammar, json_schema or response_format), for the errors of
	// a field that may not join it (tools).
	grammar      *grammar.Grammar
	grammarSrc   string
	grammarField string
}

// tokenProbs is one generated token's probability and the most probable
// tokens at its position.
type tokenProbs struct {
	id   int32
	prob float32
	top  []engine.TokenProb
}

// piece is new output of one sample: the text that became final and the
// token ids generated since the previous piece. finish is set on a
// sample's last piece.
type piece struct {
	sample int
	text   string
	ids    []int32
	finish string       // "", "length", "stop" or "abort"
	word   string       // the stop string that ended the sample, if one did
	probs  []tokenProbs // per id, when genRequest.topProbs asked
	// What a llama-server stream event reports beside the piece.
	slot      int           // the slot the generation runs in
	generated int           // tokens generated so far, all samples
	cached    int           // prompt tokens found in the prefix cache
	start, at time.Time     // when the request began, when this piece was made
	timings   *llamaTimings // the request's so far: on a sample's last piece, or on each with timingsPerToken
}

// genResult sums up a finished generation.
type genResult struct {
	promptTokens int
	cached       int // prompt tokens found in the prefix cache
	// cachedByTier splits cached by where the KV was found: the pool
	// (kvevents.Medium) and each cache tier by its name; nil without tiers.
	cachedByTier map[string]int
	misses       misses.Reasons // why the other prompt tokens were computed
	completion   int            // tokens generated, all samples
	samples      []sampleOut
	slot         int // the llama-server slot it ran in
	start        time.Time
	firstToken   time.Time // zero if none was generated
	lastToken    time.Time
	// timingsPerToken: every piece carries the timings so far.
	timingsPerToken bool
}

// sampleOut is everything one sample produced.
type sampleOut struct {
	text   strings.Builder
	ids    []int32
	probs  []tokenProbs
	finish string
	word   string
}

// sampleState follows one sample while it streams.
type sampleState struct {
	dec    *tokenizer.Stream
	text   string // decoded, not yet handed out
	ids    []int32
	probs  []tokenProbs // of ids, when asked
	last   time.Time
	finish string
}

// generate runs g on the engine and calls emit with each new piece, in
// order. It returns when every sample has finished, or when ctx is done
// (the client went away) or emit fails; in those cases the request is
// cancelled in the engine. The result is complete only on success.
func (h *Handler) generate(ctx context.Context, id int, g genRequest, emit func(piece) error) (res *genResult, fail *apiError) {
	defer func() { setOutcome(ctx, outcomeOf(res, fail)) }()
	if len(g.prompt) == 0 {
		return h.emptyPrompt(g, emit)
	}
	if e := h.fitContext(&g); e != nil {
		return nil, e
	}
	// A length of 0 evaluates the prompt into the cache and generates
	// nothing (a cache warm-up, llama-server's n_predict 0): the engine
	// computes the prompt and samples one token, which is dropped.
	warmUp := g.maxTokens == 0
	res = &genResult{promptTokens: len(g.prompt), start: time.Now(), samples: make([]sampleOut, max(g.n, 1)), timingsPerToken: g.timingsPerToken}
	if g.settings.Samplers == nil { // an OpenAI endpoint: describe the request for /slots
		g.settings = h.withEOSBias(settingsOf(g, g.maxTokens, false, g.topProbs))
	}
	slot, e := h.slots.acquire(g.slot, id, g.prompt, g.cacheSalt, g.settings)
	if e != nil {
		return nil, e
	}
	res.slot = slot
	defer func() {
		cached, byTier := 0, map[string]int(nil)
		if res != nil {
			cached, byTier = res.cached, res.cachedByTier
		}
		h.slots.release(slot, cached, byTier)
		h.llama.observe(res) // llamametrics.go
	}()
	ch, err := h.es.Submit(engine.Request{ID: id, Prompt: g.prompt, MaxTokens: max(g.maxTokens, 1), Sampling: g.sampling, N: g.n, IgnoreEOS: g.ignoreEOS, CacheSalt: g.cacheSalt, TopProbs: g.topProbs, PostSamplingProbs: g.postSampling, Constraint: h.constraint(&g)})
	switch {
	case errors.Is(err, engine.ErrStopped):
		return nil, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"}
	case errors.Is(err, engine.ErrQueueFull):
		h.metrics.rejected.Inc()
		return nil, &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
			Message: "the server's waiting queue is full; retry later"}
	case err != nil:
		return nil, errBadRequest("prompt", "%s", strings.TrimPrefix(err.Error(), "engine: "))
	}
	h.metrics.promptTokens.Add(float64(len(g.prompt)))
	defer func() {
		if p := recover(); p != nil {
			h.es.Cancel(id) // the engine must not go on generating for a request that failed
			panic(p)
		}
	}()

	states := make([]sampleState, len(res.samples))
	for i := range states {
		if h.opts.Tokenizer != nil {
			states[i].dec = h.opts.Tokenizer.NewStream()
		}
	}
	open := len(states) // samples not finished yet, as the client sees them
	// abandon cancels the request in the engine; its stream ends at the
	// next step and is left to the garbage collector.
	abandon := func() { h.es.Cancel(id) }
	finish := func(i int, reason, word string) error {
		st := &states[i]
		if st.finish != "" {
			return nil
		}
		if reason != "stop" || word == "" {
			st.text += st.flush()
		}
		st.finish = reason
		open--
		out := &res.samples[i]
		out.finish, out.word = reason, word
		out.text.WriteString(st.text)
		p := res.piece(i, st.text, st.ids, st.probs)
		p.finish, p.word, p.timings = reason, word, llamaTimingsOf(res)
		st.text, st.ids, st.probs = "", nil, nil
		return emit(p)
	}

	for {
		o, ok, rerr := ch.Recv(ctx)
		if rerr != nil {
			abandon()
			return nil, &apiError{Status: 499, Type: "cancelled", Message: "client went away"}
		}
		if !ok {
			break
		}
		st := &states[o.Sample]
		if st.finish != "" {
			if open == 0 {
				abandon()
				break
			}
			continue // ended early by a stop string or token
		}
		res.cached, res.misses = o.Cached, o.Misses
		if o.Promoted != nil && res.cachedByTier == nil {
			res.cachedByTier = h.byTier(o.Cached, o.Promoted)
		}
		if o.Err != nil {
			abandon()
			return nil, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: o.Err.Error()}
		}
		if o.Reason == "cancelled" { // too slow a reader, or a shutdown
			if err := finish(o.Sample, "abort", ""); err != nil {
				abandon()
				return nil, clientGone(err)
			}
			continue
		}
		if warmUp {
			res.firstToken, res.lastToken = time.Now(), time.Now() // the prompt's time, for the timings
			if err := finish(o.Sample, "length", ""); err != nil {
				abandon()
				return nil, clientGone(err)
			}
			continue
		}
		now := time.Now()
		h.observeToken(res, st, now)
		res.completion++
		reason, word := "", ""
		if (!g.ignoreEOS || g.grammar != nil) && h.stopIDs[o.Token] { // with a grammar, EOS comes only where it may end
			reason = "stop" // an end-of-turn token: not part of the text
		} else {
			st.ids = append(st.ids, o.Token)
			res.samples[o.Sample].ids = append(res.samples[o.Sample].ids, o.Token)
			if g.topProbs > 0 {
				tp := tokenProbs{id: o.Token, prob: o.Prob, top: o.Top}
				st.probs = append(st.probs, tp)
				res.samples[o.Sample].probs = append(res.samples[o.Sample].probs, tp)
			}
			if st.dec != nil {
				st.text += st.dec.Next(o.Token)
			}
			if cut, w, found := findStop(st.text, g.stop); found {
				st.text, reason, word = st.text[:cut], "stop", w
			} else if o.Done {
				reason = map[string]string{"eos": "stop"}[o.Reason]
				if reason == "" {
					reason = "length"
				}
			}
		}
		var err error
		if reason != "" {
			err = finish(o.Sample, reason, word)
		} else if safe := holdBack(st.text, g.stop); safe > 0 || len(st.ids) > 0 {
			p := res.piece(o.Sample, st.text[:safe], st.ids, st.probs)
			res.samples[o.Sample].text.WriteString(p.text)
			st.text, st.ids, st.probs = st.text[safe:], nil, nil
			err = emit(p)
		}
		if err != nil {
			abandon()
			return nil, clientGone(err)
		}
		if open == 0 && !o.Done {
			// Every sample ended early: stop generating for nobody.
			abandon()
			break
		}
	}
	return res, nil
}

// emptyPrompt answers a generation of an empty prompt (a text prompt of
// no tokens, on a model without BOS) as llama-server does: at once, with
// no tokens and finish reason "length", without the engine.
func (h *Handler) emptyPrompt(g genRequest, emit func(piece) error) (*genResult, *apiError) {
	res := &genResult{start: time.Now(), samples: make([]sampleOut, max(g.n, 1)), slot: max(g.slot, 0)}
	for i := range res.samples {
		res.samples[i].finish = "length"
		p := res.piece(i, "", nil, nil)
		p.finish, p.timings = "length", llamaTimingsOf(res)
		if err := emit(p); err != nil {
			return nil, clientGone(err)
		}
	}
	return res, nil
}

// piece returns sample i's new output with the request's progress.
func (r *genResult) piece(i int, text string, ids []int32, probs []tokenProbs) piece {
	p := piece{sample: i, text: text, ids: ids, probs: probs, slot: r.slot, generated: r.completion, cached: r.cached, start: r.start, at: r.lastToken}
	if r.timingsPerToken {
		p.timings = llamaTimingsOf(r)
	}
	return p
}

// outcomeOf is the outcome (outcome.go) of a generation that returned res
// or fail: a finished one's reason; "abort" when the client went away or
// could not be written to (499); "error" when the engine failed it (500);
// none when it was refused before it ran, which the handler counts as
// rejected.
func outcomeOf(res *genResult, fail *apiError) string {
	switch {
	case fail == nil && res == nil: // generate panicked before it had a result
		return "error"
	case fail == nil:
		return res.outcome()
	case fail.Status == 499:
		return "abort"
	case fail.Status == http.StatusInternalServerError:
		return "error"
	}
	return ""
}

// outcome is a finished generation's outcome: "abort" if any sample was
// cut short (a too slow reader, a shutdown), else "length" if any sample
// ran out of tokens, else "stop".
func (r *genResult) outcome() string {
	reason := "stop"
	for _, s := range r.samples {
		switch {
		case s.finish == "abort":
			return "abort"
		case s.finish == "length":
			reason = "length"
		}
	}
	return reason
}

// fitContext checks g against the context one sequence can hold
// (engine.Server.ContextLimit: the model's, --max-context's and the KV
// pool's, whichever is least). A prompt that leaves no room, or an output
// length the client asked for that would not fit, is refused with a 400
// that both vLLM's and llama-server's clients read (errContext); an output
// length the client did not ask for is cut to what fits, and a generation
// that runs into that cut is reported truncated, as llama-server does.
func (h *Handler) fitContext(g *genRequest) *apiError {
	limit := h.es.ContextLimit()
	if len(g.prompt) >= limit {
		return errContext("prompt", len(g.prompt), limit, "This model's maximum context length is %d tokens. However, your prompt has %d tokens, which leaves no room to generate: the request exceeds the available context size. Please reduce the length of the prompt.", limit, len(g.prompt))
	}
	if g.maxParam != "" && len(g.prompt)+g.maxTokens > limit {
		return errContext(g.maxParam, len(g.prompt)+g.maxTokens, limit, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion): the request exceeds the available context size. Please reduce the length of the prompt or of the completion.", limit, len(g.prompt)+g.maxTokens, len(g.prompt), g.maxTokens)
	}
	g.maxTokens = min(g.maxTokens, limit-len(g.prompt))
	return nil
}

// errContext is the 400 for a request of tokens tokens that does not fit
// a context of nCtx: vLLM's code context_length_exceeded, llama-server's
// type exceed_context_size_error with n_prompt_tokens and n_ctx.
func errContext(param string, tokens, nCtx int, format string, args ...any) *apiError {
	e := errBadRequest(param, format, args...)
	e.Code, e.Type = "context_length_exceeded", "exceed_context_size_error"
	e.NPromptTokens, e.NCtx = tokens, nCtx
	return e
}

// newID returns a fresh engine request id.
func (h *Handler) newID() int { return int(h.ids.Add(1)) }

// flush returns the text the decoder still holds back.
func (st *sampleState) flush() string {
	if st.dec == nil {
		return ""
	}
	return st.dec.Flush()
}

// observeToken records a token's timing in the histograms and the result.
func (h *Handler) observeToken(res *genResult, st *sampleState, now time.Time) {
	h.metrics.generationTokens.Inc()
	if res.firstToken.IsZero() {
		res.firstToken = now
		h.metrics.ttft.Observe(now.Sub(res.start).Seconds())
	}
	if !st.last.IsZero() {
		h.metrics.itl.Observe(now.Sub(st.last).Seconds())
	}
	st.last, res.lastToken = now, now
}

func clientGone(err error) *apiError {
	return &apiError{Status: 499, Type: "cancelled", Message: "writing to the client: " + err.Error()}
}

// findStop returns where the first stop string in text begins.
func findStop(text string, stops []string) (cut int, word string, found bool) {
	cut = -1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (cut < 0 || i < cut) {
			cut, word = i, s
		}
	}
	return cut, word, cut >= 0
}

// holdBack returns how much of text can be handed out now: all of it but a
// tail that could still become a stop string, cut at a character boundary.
func holdBack(text string, stops []string) int {
	keep := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(text)); k > keep; k-- {
			if strings.HasPrefix(s, text[len(text)-k:]) {
				keep = k
				break
			}
		}
	}
	safe := len(text) - keep
	for safe > 0 && safe < len(text) && !utf8.RuneStart(text[safe]) {
		safe--
	}
	return safe
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// byTier splits a request's cached prompt tokens by where they were found:
// promoted[i] came from the engine's cache tier i, the rest from the pool.
func (h *Handler) byTier(cached int, promoted []int) map[string]int {
	out := make(map[string]int, len(promoted)+1)
	pool := cached
	for i, n := range promoted {
		if i < len(h.tierNames) {
			out[h.tierNames[i]] += n
			pool -= n
		}
	}
	out[kvevents.Medium] = pool
	return out
}
