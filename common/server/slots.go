package server

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Slots are llama-server's slots as this engine can honestly have them.
//
// llama-server gives each of its --parallel N slots a KV cache of its own:
// a request runs in one slot, reuses that slot's KV for the prefix it shares
// with the slot's previous prompt, and waits while every slot is busy. This
// engine has one paged pool shared by every request and a prefix cache over
// it, so a prompt reuses whatever any earlier request left, and requests
// run as the pool and the batch allow, not as slots do. A slot here is a
// named handle on the blocks of the last prompt that ran in it:
//
//   - a request picks its slot with id_slot, or gets the idle slot whose
//     last prompt shares the longest prefix with it (llama-server's choice),
//     else the least recently used; it never waits for one;
//   - GET /slots reports each slot's last prompt and settings, and whether
//     requests are running in it;
//   - POST /slots/{id}?action=save writes the cached blocks of the slot's
//     last prompt to a file in --slot-save-path, in the --cache-dir format
//     (CacheFile); action=restore commits a file's blocks back into the
//     prefix cache, on the engine's goroutine, and makes its prompt the
//     slot's; action=erase forgets the slot's prompt (the blocks stay in
//     the prefix cache, which evicts them as it evicts any other).
type slotTable struct {
	mu    sync.Mutex
	slots []slot
	clock uint64 // ticks once per acquire, for least-recently-used
}

// slot is one handle. Fields are guarded by slotTable.mu.
type slot struct {
	id      int
	task    int     // the id of the last request that ran here, -1 before any
	running int     // requests running here now
	prompt  []int32 // the last prompt (or the restored one)
	salt    string  // its cache salt: a save leaves salted KV out
	cached  int     // of the last prompt's tokens, those found in the prefix cache
	// cachedByTier splits cached by where it was found (genResult's)
	cachedByTier map[string]int
	params       generationSettings
	next         nextToken
	used         uint64 // slotTable.clock at the last acquire
}

// nextToken is the state of a slot's last generation, as llama-server's
// /slots shows it.
type nextToken struct {
	HasNextToken bool   `json:"has_next_token"`
	HasNewLine   bool   `json:"has_new_line"`
	NRemain      int    `json:"n_remain"`
	NDecoded     int    `json:"n_decoded"`
	StoppingWord string `json:"stopping_word"`
}

func newSlotTable(n int) *slotTable {
	t := &slotTable{slots: make([]slot, max(n, 1))}
	for i := range t.slots {
		t.slots[i] = slot{id: i, task: -1, params: offSettings(), next: nextToken{NRemain: -1}}
	}
	return t
}

// acquire puts request task with prompt into slot want (-1: choose one)
// and returns the slot's id. A want out of range is a 400.
func (t *slotTable) acquire(want, task int, prompt []int32, salt string, params generationSettings) (int, *apiError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if want >= len(t.slots) {
		return 0, errBadRequest("id_slot", "id_slot %d does not exist: this server has %d slots (--parallel)", want, len(t.slots))
	}
	if want < 0 {
		want = t.choose(prompt, salt)
	}
	t.clock++
	s := &t.slots[want]
	s.task, s.running, s.used = task, s.running+1, t.clock
	s.prompt, s.salt, s.params, s.cached, s.cachedByTier = prompt, salt, params, 0, nil
	s.next = nextToken{HasNextToken: true, NRemain: params.NPredict}
	return want, nil
}

// choose returns the slot a prompt goes to when the client names none:
// among idle slots if there are any (else among all), the one whose last
// prompt, under the same salt, shares the longest prefix with it, and
// among equals the least recently used.
func (t *slotTable) choose(prompt []int32, salt string) int {
	idle := false
	for i := range t.slots {
		idle = idle || t.slots[i].running == 0
	}
	best, bestLen := -1, -1
	for i := range t.slots {
		s := &t.slots[i]
		if idle && s.running > 0 {
			continue
		}
		n := 0
		if s.salt == salt {
			n = commonPrefix(s.prompt, prompt)
		}
		if n > bestLen || n == bestLen && s.used < t.slots[best].used {
			best, bestLen = i, n
		}
	}
	return best
}

// release records that the request in slot id ended, and how many of its
// prompt's tokens it found cached.
func (t *slotTable) release(id int, cached int, byTier map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.slots[id]
	s.running--
	s.cached, s.cachedByTier = cached, byTier
	if s.running == 0 {
		// An idle slot forgets its task's budget, as llama-server's does:
		// n_remain -1 (none), n_decoded 0.
		s.next = nextToken{NRemain: -1}
	}
}

// setPrompt makes prompt the slot's last prompt (a restore), or forgets it
// (nil: an erase). It returns the number of tokens it replaced. The prompt
// takes the file's cache salt, none (a file holds unsalted blocks only):
// the salt of the request that ran before would make a later save refuse
// the restored prompt.
func (t *slotTable) setPrompt(id int, prompt []int32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.slots[id]
	n := len(s.prompt)
	s.prompt, s.salt, s.cached, s.cachedByTier = prompt, "", len(prompt), nil
	s.params.CacheSalt = ""
	return n
}

// lastPrompt returns slot id's last prompt and its salt.
func (t *slotTable) lastPrompt(id int) ([]int32, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slots[id].prompt, t.slots[id].salt
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// slotJSON is one entry of GET /slots: llama-server's fields. A slot that
// has never run a request has only the first four, as llama-server's: its
// task's fields (SlotTask) appear once a request has run in it.
type slotJSON struct {
	ID           int  `json:"id"`
	NCtx         int  `json:"n_ctx"`
	Speculative  bool `json:"speculative"`
	IsProcessing bool `json:"is_processing"`
	*SlotTask         // nil before the slot's first request
}

// SlotTask is what GET /slots shows of the last request that ran in a slot
// (or of a restored prompt), plus that prompt's length in tokens.
type SlotTask struct {
	IDTask     int `json:"id_task"`
	NPrompt    int `json:"n_prompt_tokens"`
	NProcessed int `json:"n_prompt_tokens_processed"` // computed, not found cached
	NCached    int `json:"n_prompt_tokens_cache"`
	// NCachedByTier splits NCached by where the KV was found, with cache
	// tiers (usage's cached_tokens_by_tier).
	NCachedByTier map[string]int     `json:"n_prompt_tokens_cache_by_tier,omitempty"`
	Params        generationSettings `json:"params"`
	Prompt        string             `json:"prompt"`
	NextToken     []nextToken        `json:"next_token"` // one entry, as llama-server writes it
}

// generationSettings is llama-server's generation settings object. The
// samplers this engine has (temperature, top-p) carry the request's values;
// the ones it has not carry the value that turns them off in llama-server
// (top_k 0, min_p 0, typical_p 1, penalties 1 or 0, mirostat 0), so a
// client reading them learns what was really applied.
type generationSettings struct {
	Seed                int64    `json:"seed"`
	Temperature         float64  `json:"temperature"`
	DynatempRange       float64  `json:"dynatemp_range"`
	DynatempExponent    float64  `json:"dynatemp_exponent"`
	TopK                int      `json:"top_k"`
	TopP                float64  `json:"top_p"`
	MinP                float64  `json:"min_p"`
	TopNSigma           float64  `json:"top_n_sigma"`
	XTCProbability      float64  `json:"xtc_probability"`
	XTCThreshold        float64  `json:"xtc_threshold"`
	TypicalP            float64  `json:"typical_p"`
	RepeatLastN         int      `json:"repeat_last_n"`
	RepeatPenalty       float64  `json:"repeat_penalty"`
	PresencePenalty     float64  `json:"presence_penalty"`
	FrequencyPenalty    float64  `json:"frequency_penalty"`
	DryMultiplier       float64  `json:"dry_multiplier"`
	DryBase             float64  `json:"dry_base"`
	DryAllowedLength    int      `json:"dry_allowed_length"`
	DryPenaltyLastN     int      `json:"dry_penalty_last_n"`
	DrySequenceBreakers []string `json:"dry_sequence_breakers"`
	Mirostat            int      `json:"mirostat"`
	MirostatTau         float64  `json:"mirostat_tau"`
	MirostatEta         float64  `json:"mirostat_eta"`
	AdaptiveTarget      float64  `json:"adaptive_target"`
	AdaptiveDecay       float64  `json:"adaptive_decay"`
	Stop                []string `json:"stop"`
	MaxTokens           int      `json:"max_tokens"`
	NPredict            int      `json:"n_predict"`
	NKeep               int      `json:"n_keep"`
	NDiscard            int      `json:"n_discard"`
	IgnoreEOS           bool     `json:"ignore_eos"`
	Stream              bool     `json:"stream"`
	LogitBias           []any    `json:"logit_bias"`
	NProbs              int      `json:"n_probs"`
	MinKeep             int      `json:"min_keep"`
	Grammar             string   `json:"grammar"`
	GrammarLazy         bool     `json:"grammar_lazy"`
	GrammarTriggers     []any    `json:"grammar_triggers"`
	PreservedTokens     []string `json:"preserved_tokens"`
	ChatFormat          string   `json:"chat_format"`
	ReasoningFormat     string   `json:"reasoning_format"`
	ReasoningInContent  bool     `json:"reasoning_in_content"`
	GenerationPrompt    string   `json:"generation_prompt"`
	Samplers            []string `json:"samplers"`
	SpeculativeTypes    string   `json:"speculative.types"`
	TimingsPerToken     bool     `json:"timings_per_token"`
	PostSamplingProbs   bool     `json:"post_sampling_probs"`
	BackendSampling     bool     `json:"backend_sampling"`
	Lora                []any    `json:"lora"`
	CacheSalt           string   `json:"cache_salt,omitempty"`
}

// offSettings is generationSettings with every sampler this engine lacks
// at the value that turns it off in llama-server.
func offSettings() generationSettings {
	return generationSettings{
		NPredict: -1, MaxTokens: -1, Seed: -1, TopNSigma: -1, TypicalP: 1, RepeatPenalty: 1, DryBase: 1.75,
		AdaptiveTarget: -1, AdaptiveDecay: 0.9,
		DrySequenceBreakers: []string{}, Stop: []string{}, LogitBias: []any{}, GrammarTriggers: []any{}, PreservedTokens: []string{},
		ChatFormat: "Content-only", ReasoningFormat: "none", SpeculativeTypes: "none",
		Samplers: []string{"top_p", "temperature"}, Lora: []any{},
	}
}

// settingsOf describes g as llama-server's generation settings.
func settingsOf(g genRequest, nPredict int, stream bool, nProbs int) generationSettings {
	gs := offSettings()
	gs.NPredict, gs.MaxTokens, gs.Seed = nPredict, nPredict, int64(g.sampling.Seed&(1<<63-1))
	gs.Temperature, gs.TopP = g.sampling.Temperature, g.sampling.TopP
	gs.PostSamplingProbs, gs.TopK = g.postSampling, g.sampling.TopK
	gs.Grammar = g.grammarSrc
	for _, b := range g.sampling.LogitBias { // the request's logit_bias, -inf as null
		var bias *float64
		if !math.IsInf(float64(b.Bias), -1) {
			f := float64(b.Bias)
			bias = &f
		}
		gs.LogitBias = append(gs.LogitBias, eosBias{Bias: bias, Token: b.ID})
	}
	if g.stop != nil {
		gs.Stop = g.stop
	}
	gs.IgnoreEOS, gs.Stream, gs.NProbs, gs.CacheSalt = g.ignoreEOS, stream, nProbs, g.cacheSalt
	return gs
}

// eosBias is an end-of-generation token's entry in the logit_bias of an
// ignore_eos request's settings: the bias is -inf, which JSON writes as
// null, as llama-server does.
type eosBias struct {
	Bias  *float64 `json:"bias"`
	Token int32    `json:"token"`
}

// withEOSBias adds to gs's logit_bias, when the request ignores EOS, every
// end-of-generation token of the tokenizer, lowest id first: that is how
// llama-server carries out ignore_eos, and how its settings show it.
func (h *Handler) withEOSBias(gs generationSettings) generationSettings {
	if !gs.IgnoreEOS {
		return gs
	}
	ids := make([]int32, 0, len(h.stopIDs))
	for id := range h.stopIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	bias := slices.Clone(gs.LogitBias)
	for _, id := range ids {
		bias = append(bias, eosBias{Token: id})
	}
	gs.LogitBias = bias
	return gs
}

// slotsJSON returns every slot as GET /slots shows it.
func (h *Handler) slotsJSON() []slotJSON {
	t := h.slots
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]slotJSON, len(t.slots))
	for i := range t.slots {
		s := &t.slots[i]
		out[i] = slotJSON{ID: s.id, NCtx: h.es.ContextLimit(), IsProcessing: s.running > 0}
		if s.task >= 0 || s.prompt != nil {
			out[i].SlotTask = &SlotTask{
				IDTask: s.task, NPrompt: len(s.prompt), NProcessed: len(s.prompt) - s.cached, NCached: s.cached, NCachedByTier: s.cachedByTier,
				Params: s.params, Prompt: h.piecesText(s.prompt), NextToken: []nextToken{s.next},
			}
		}
	}
	return out
}

// getSlots serves GET /slots; with ?fail_on_no_slot, a 503 when no slot is
// idle, as llama-server answers.
func (h *Handler) getSlots(w http.ResponseWriter, r *http.Request) {
	slots := h.slotsJSON()
	if r.URL.Query().Has("fail_on_no_slot") {
		idle := false
		for _, s := range slots {
			idle = idle || !s.IsProcessing
		}
		if !idle {
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "no_slot", Message: "no slot available"})
			return
		}
	}
	writeJSON(w, http.StatusOK, slots)
}

// slotAction serves POST /slots/{id}?action=save|restore|erase.
func (h *Handler) slotAction(w http.ResponseWriter, r *http.Request) {
	if h.opts.SlotSavePath == "" {
		writeError(w, errNotSupported("This server does not support slots action. Start it with `--slot-save-path`"))
		return
	}
	id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/slots/"))
	if err != nil || id < 0 || id >= len(h.slots.slots) {
		writeError(w, errBadRequest("id_slot", "Invalid slot ID %q: this server has slots 0 to %d", strings.TrimPrefix(r.URL.Path, "/slots/"), len(h.slots.slots)-1))
		return
	}
	switch action := r.URL.Query().Get("action"); action {
	case "save", "restore":
		var q struct {
			Filename string `json:"filename"`
		}
		if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
			writeError(w, e)
			return
		}
		if !validFilename(q.Filename) {
			writeError(w, errBadRequest("filename", "Invalid filename"))
			return
		}
		if action == "save" {
			h.saveSlot(w, r, id, q.Filename)
		} else {
			h.restoreSlot(w, r, id, q.Filename)
		}
	case "erase":
		n := h.slots.setPrompt(id, nil)
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
	default:
		writeError(w, errBadRequest("action", "Invalid action %q: want save, restore or erase", action))
	}
}

// errNotSupported is llama-server's 501 for a feature the server was not
// started with.
func errNotSupported(msg string) *apiError {
	return &apiError{Status: http.StatusNotImplemented, Type: "not_supported_error", Code: "not_supported", Message: msg}
}

// validFilename is llama.cpp's rule for slot file names, so a name one
// server refuses the other refuses too: 1 to 255 bytes of valid UTF-8; no
// control characters, no / \ : * ? " < > |, nor their look-alikes (U+2215,
// U+2216, U+FF0E), surrogates, U+FFFD or a BOM; no leading or trailing
// space, no trailing dot, no "..", not ".".
func validFilename(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || name == "." || strings.Contains(name, "..") {
		return false
	}
	for _, c := range name {
		switch {
		case c <= 0x1f, c == 0x7f, c >= 0x80 && c <= 0x9f,
			c == 0xff0e, c == 0x2215, c == 0x2216, c >= 0xd800 && c <= 0xdfff, c == 0xfffd, c == 0xfeff,
			strings.ContainsRune(`/\:*?"<>|`, c):
			return false
		}
	}
	return name[0] != ' ' && name[len(name)-1] != ' ' && name[len(name)-1] != '.'
}

// piecesText is the text of ids with special tokens written out, as
// llama-server shows prompts; "" without a tokenizer.
func (h *Handler) piecesText(ids []int32) string {
	t := h.opts.Tokenizer
	if t == nil {
		return ""
	}
	var b []byte
	for _, id := range ids {
		b = append(b, t.Piece(id)...)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
