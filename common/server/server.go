// Package server puts an engine behind HTTP: the OpenAI completions and chat
// completions API, llama-server's /completion, model listing, health, and
// Prometheus metrics.
//
// A request's journey, in order:
//
//  1. the handler (openai.go, llama.go) decodes the JSON body, refuses bad
//     input with an OpenAI-style error (errors.go), and turns text into
//     token ids with the model's tokenizer (a chat through its template);
//  2. generate (generate.go) fits the request to the context, submits an
//     engine.Request to the engine.Server (which refuses it while the
//     waiting queue is full), and reads the request's output stream — a
//     buffer the engine's goroutine fills without ever waiting for it, one
//     event per token;
//  3. the engine's goroutine, the only one that touches the engine, admits
//     the request, matches its prompt against the prefix cache, prefills the
//     rest in chunks and decodes it in continuous batches with the others;
//  4. generate turns each token into text (holding back incomplete UTF-8 and
//     a possible stop string), and hands it to the handler, which writes it
//     as a server-sent event or gathers it into one JSON response;
//  5. when the client goes away, or a write to it has not gone through
//     within Options.WriteTimeout, generate cancels the request in the
//     engine (engine.Server.Cancel): its blocks go back to the pool at the
//     next step. A client that reads too slowly has its request cancelled
//     by the engine's loop itself (engine.Limits.MaxUnread);
//  6. the request is counted in exactly one outcome (outcome.go).
//
// The number a router reads, usage.prompt_tokens_details.cached_tokens (and
// tokens_cached on /completion), is the engine's Output.Cached: the prompt
// tokens whose KV the request found in the prefix cache when it was first
// admitted.
package server

import (
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/engine"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/tokenizer"
)

// Options configures a Handler.
type Options struct {
	// Verbose puts llama-server's "__verbose" (the rendered prompt) in
	// every chat answer, as its --verbose does; a request asks for it with
	// "verbose" (chattemplate.go).
	Verbose bool
	// ModelName is the id /v1/models lists. A request's "model" field is
	// not checked unless StrictModelName is set (llama-server serves its
	// one model whatever name a request gives).
	ModelName string
	// Aliases are more names of the model (llama-server's --alias with
	// several names): /v1/models lists them beside ModelName, and
	// StrictModelName accepts them too.
	Aliases []string
	// StrictModelName refuses, with 404 model_not_found, a request naming
	// a model that is neither ModelName nor one of Aliases (vLLM's
	// behaviour); a request naming none is served.
	StrictModelName bool
	// Tags are the model's tags (llama-server's --tags), listed by
	// /v1/models; informational.
	Tags []string
	// APIKeys, when not empty, are the keys a request must present
	// (Authorization: Bearer <key>, or X-Api-Key) on every endpoint but
	// the public ones; others get 401 (auth.go).
	APIKeys []string
	// CORS is how cross-origin requests are answered (cors.go).
	CORS CORS
	// NoMetrics answers GET /metrics with llama-server's 501 (its
	// --metrics off); the zero value serves them.
	NoMetrics bool
	// NoSlots answers GET /slots with llama-server's 501 (--no-slots).
	NoSlots bool
	// Ghosts, when set, reports the ghost caches run beside the prefix
	// cache (common/kvcache/ghost), for /metrics' kvlab:ghost_* series.
	Ghosts func() ghost.Report
	// NoUI answers GET / with a 404 (llama-server's --no-ui) instead of
	// the home page (home.go).
	NoUI bool
	// Tokenizer turns text into tokens and back; nil serves token ids only
	// (text prompts and chat are refused with 400).
	Tokenizer *tokenizer.Tokenizer
	// MaxN is the most samples (n) one request may ask for: more is a 400.
	// 0 means DefaultMaxN. A cap keeps one request from taking every
	// running slot (see cli's -max-n check against -max-running).
	MaxN int
	// WriteTimeout bounds each write to a client (deadlineWriter); 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxBodyBytes bounds a request body (413 beyond it); 0 means 8 MiB.
	MaxBodyBytes int64
	// PrefixCaching says whether the engine has a prefix cache, for
	// /v1/models and the metrics' labels.
	PrefixCaching bool
	// KVEvents, when set, serves GET /v1/kv_events (kvevents.go).
	KVEvents *KVEvents
	// DebugCache, when set, serves GET /debug/cache, the prefix cache
	// drawn live, with its JSON and event stream (debugcache.go).
	DebugCache *DebugCache
	// CacheFile, when set, serves POST /cache/save (persist.go).
	CacheFile *CacheFile
	// Slots is the number of llama-server slots (--parallel); 0 means 1.
	// A slot is a handle on the blocks of its last prompt (slots.go), not
	// a limit on how many requests run.
	Slots int
	// SlotSavePath is the directory of slot files (--slot-save-path); ""
	// refuses slot actions with 501, as llama-server does.
	SlotSavePath string
	// SlotKV describes the pool's KV for slot files: its identity,
	// observer and hash seed (CacheFile; Path unused). nil without a
	// prefix cache.
	SlotKV *CacheFile
	// ModelPath is what /props reports as model_path.
	ModelPath string
	// ModelInfo describes the weights, for /v1/models and /props.
	ModelInfo ModelInfo
	// MaxTextRequests bounds the /tokenize and /detokenize requests served
	// at once (textgate.go); one more is refused with 503. 0 means
	// DefaultMaxTextRequests.
	MaxTextRequests int
	// Defaults are the sampling settings of a request that names none
	// (--temp, --seed, --n-predict; defaults.go).
	Defaults Defaults
	// Log receives what no answer can carry: a recovered panic and its
	// stack (recover.go). nil means os.Stderr.
	Log io.Writer

	hooks *testHooks // faults a test injects (recover.go); nil in production
}

// ModelInfo is what llama-server's /v1/models tells of a model in "meta".
type ModelInfo struct {
	VocabType int    // llama.cpp's vocabulary type: 1 SentencePiece, 2 byte-level BPE
	Vocab     int    // entries of the embedding table
	CtxTrain  int    // max_position_embeddings
	Embd      int    // hidden size
	Params    int64  // parameters
	Size      int64  // bytes of the weights
	FType     string // the weights' type as llama.cpp names it: F32, BF16, F16
}

// DefaultMaxN is Options.MaxN's default.
const DefaultMaxN = 16

// Handler serves the HTTP API in front of one engine.Server.
type Handler struct {
	es      *engine.Server
	opts    Options
	stopIDs map[int32]bool // end-of-turn tokens of the tokenizer
	ids     atomic.Int64   // engine request ids handed out
	created int64          // unix time the handler was made (for /v1/models)
	// tierNames are the engine's cache tiers' names, in order: the tiers
	// are fixed when the engine is built.
	tierNames []string
	mux       map[string]route
	metrics   *metrics
	llama     *llamaMetrics // llama-server's llamacpp:* series (llamametrics.go)
	reg       *prometheus.Registry
	slots     *slotTable
	text      chan struct{} // one token per /tokenize or /detokenize being served (textgate.go)
	vocab     grammarVocab  // the tokenizer's vocabulary for grammars, built on first use (structured.go)
}

// route is a path's handlers by method.
type route map[string]func(w http.ResponseWriter, r *http.Request)

// allow lists a route's methods, for the Allow header and the 405.
func (rt route) allow() string {
	ms := make([]string, 0, len(rt))
	for m := range rt {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	return strings.Join(ms, ", ")
}

// New returns the handler for es. The engine.Server must be running (its
// Run loop on its own goroutine) for requests to be served.
func New(es *engine.Server, opts Options) *Handler {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.ModelName == "" {
		opts.ModelName = "kvlab"
	}
	if opts.MaxN <= 0 {
		opts.MaxN = DefaultMaxN
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxTextRequests <= 0 {
		opts.MaxTextRequests = DefaultMaxTextRequests
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.hooks == nil {
		opts.hooks = &testHooks{}
	}
	h := &Handler{es: es, opts: opts, stopIDs: map[int32]bool{}, created: time.Now().Unix(), reg: prometheus.NewRegistry(), slots: newSlotTable(opts.Slots),
		text: make(chan struct{}, opts.MaxTextRequests)}
	if opts.Tokenizer != nil {
		for _, id := range opts.Tokenizer.EOS() {
			h.stopIDs[id] = true
		}
	}
	h.metrics = newMetrics(h.reg, es)
	opts.KVEvents.register(h.reg)        // kvevents_metrics.go
	h.llama = newLlamaMetrics(h.reg, es) // llamametrics.go
	for _, t := range es.Snapshot().Tiers {
		h.tierNames = append(h.tierNames, t.Name)
	}
	if opts.Ghosts != nil {
		h.reg.MustRegister(ghostCollector{opts.Ghosts}) // ghost_metrics.go
	}
	h.mux = map[string]route{
		"/v1/completions":                   {http.MethodPost: h.counted(h.completions)},
		"/v1/chat/completions":              {http.MethodPost: h.counted(h.chatCompletions)},
		"/completion":                       {http.MethodPost: h.counted(h.llamaCompletion)},
		"/v1/models":                        {http.MethodGet: h.models},
		"/health":                           {http.MethodGet: h.health},
		"/v1/health":                        {http.MethodGet: h.health},
		"/props":                            {http.MethodGet: h.props, http.MethodPost: h.setProps},
		"/slots":                            {http.MethodGet: h.listSlots},
		"/tokenize":                         {http.MethodPost: h.tokenize},
		"/detokenize":                       {http.MethodPost: h.detokenize},
		"/apply-template":                   {http.MethodPost: h.applyTemplate},
		"/v1/chat/completions/input_tokens": {http.MethodPost: h.chatInputTokens},
		"/metrics":                          {http.MethodGet: h.serveMetrics},
		"/v1/kv_events":                     {http.MethodGet: h.kvEventStream},
		"/cache/save":                       {http.MethodPost: h.saveCache},
		"/index.html":                       {http.MethodGet: h.home},
	}
	h.addLlamaRoutes() // routes.go: llama-server's other paths
	if opts.DebugCache != nil {
		opts.DebugCache.bind(h) // debugcache.go: /debug/cache
	}
	return h
}

// ServeHTTP routes a request. Unknown paths and wrong methods get a JSON
// error, as every other failure does; a panic is the request's 500, not
// the server's end (recover.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.guard(w, r, h.front)
}

// front is what llama-server does before routing, in its order: CORS
// (cors.go), which answers a preflight OPTIONS itself, then the API key
// (auth.go).
func (h *Handler) front(w http.ResponseWriter, r *http.Request) {
	if h.opts.CORS.corsPreflight(w, r) {
		return
	}
	if !h.authorized(w, r) {
		return
	}
	h.route(w, r)
}

func (h *Handler) route(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSuffix(r.URL.Path, "/")
	if key == "" {
		key = "/index.html" // the page at "/", llama-server's other name of it
	}
	rt, ok := h.mux[key]
	if !ok && strings.HasPrefix(r.URL.Path, "/slots/") {
		rt, ok = route{http.MethodPost: h.slotAction}, true
	}
	if !ok {
		writeError(w, errNotFound("no route %s %s", r.Method, r.URL.Path))
		return
	}
	serve, ok := rt[r.Method]
	if !ok {
		w.Header().Set("Allow", rt.allow())
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + rt.allow()})
		return
	}
	serve(w, r)
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	type meta struct {
		VocabType int    `json:"vocab_type"`
		Vocab     int    `json:"n_vocab"`
		Ctx       int    `json:"n_ctx"`
		CtxTrain  int    `json:"n_ctx_train"`
		Embd      int    `json:"n_embd"`
		Params    int64  `json:"n_params"`
		Size      int64  `json:"size"`
		FType     string `json:"ftype"`
	}
	type model struct {
		ID            string   `json:"id"`
		Aliases       []string `json:"aliases"`
		Tags          []string `json:"tags"`
		Object        string   `json:"object"`
		Created       int64    `json:"created"`
		OwnedBy       string   `json:"owned_by"`
		Meta          meta     `json:"meta"`
		MaxModelLen   int      `json:"max_model_len"`
		PrefixCaching bool     `json:"prefix_caching"`
	}
	mi := h.opts.ModelInfo
	m := model{
		ID: h.opts.ModelName, Aliases: h.names(), Tags: append([]string{}, h.opts.Tags...), Object: "model", Created: h.created, OwnedBy: "kvlab",
		Meta:        meta{mi.VocabType, mi.Vocab, h.es.ContextLimit(), mi.CtxTrain, mi.Embd, mi.Params, mi.Size, mi.FType},
		MaxModelLen: h.es.ContextLimit(), PrefixCaching: h.opts.PrefixCaching,
	}
	// "models" is the listing llama-server also gives in Ollama's shape.
	listing := map[string]any{
		"name": h.opts.ModelName, "model": h.opts.ModelName, "modified_at": "", "size": "", "digest": "", "type": "model",
		"description": "", "tags": []string{""}, "capabilities": []string{"completion"}, "parameters": "",
		"details": map[string]any{"parent_model": "", "format": "safetensors", "family": "", "families": []string{""}, "parameter_size": "", "quantization_level": ""},
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []model{m}, "models": []any{listing}})
}

// names returns the model's names: ModelName, then the Aliases.
func (h *Handler) names() []string {
	return append([]string{h.opts.ModelName}, h.opts.Aliases...)
}

// checkModel refuses, with StrictModelName, a request that names a model
// this server does not serve. Without it any name is served, as
// llama-server serves its one model: the OpenAI clients always send a
// model, often a name of their own ("gpt-4o-mini").
func (h *Handler) checkModel(name string) *apiError {
	if name == "" || !h.opts.StrictModelName || slices.Contains(h.names(), name) {
		return nil
	}
	e := errNotFound("the model %q does not exist; this server serves %s", name, quoteAll(h.names()))
	e.Code, e.Param = "model_not_found", "model"
	return e
}

// quoteAll is names quoted and joined with " or ".
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, " or ")
}
