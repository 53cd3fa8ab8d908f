// Package router is an HTTP front end for several serving replicas: it
// speaks the same API as one replica (OpenAI completions and chat,
// llama-server's /completion) and sends each request to the replica most
// likely to hold its prompt's prefix in its KV cache.
//
// A request's journey, in order:
//
//  1. ServeHTTP reads the body once, as bytes (proxy.go); the router never
//     rewrites it, so the replica receives exactly what the client sent;
//  2. RouteKey turns the body into the token ids the replica will compute —
//     a text prompt through the model's tokenizer, a chat through its
//     template, token ids as they are — and never canonicalises them
//     (PITFALLS.md, "Canonicalising prompts gives different prompts
//     one route key");
//  3. the policy (policy.go) picks among the healthy replicas: round-robin,
//     least-load, prefix (a radix tree of what was routed where, tree.go)
//     or kv-events (what each replica announced it holds, kvindex.go,
//     fed by one event stream per replica, events.go);
//  4. the body is POSTed to that replica and its answer relayed: a stream
//     event by event, flushed as it comes, a JSON body whole. A replica that
//     fails before a byte reached the client is taken out and the request
//     tried on another; one that fails later ends the client's stream with
//     an error event;
//  5. the replica's cached_tokens (or tokens_cached) is read from its answer
//     and added to the router's counters: the fleet's hit rate is what the
//     replicas found, summed here, not what a policy guessed (PITFALLS.md,
//     "Per-worker routing state reads 0% hits while the replicas reuse KV").
//
// A health checker polls each replica's /health; a replica that fails is
// out until it answers again. /health alone is not trusted: every attempt
// has its timeouts, a failure before the first byte is retried on another
// replica, and a replica that fails requests in a row is ejected for a
// while (resilience.go). Fleet starts replicas as child processes.
package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kvlab/common/tokenizer"
)

// Options configures a Router.
type Options struct {
	// Replicas are the replicas' base URLs (http://host:port).
	Replicas []string
	// Policy chooses a replica per request.
	Policy Policy
	// Tokenizer turns text prompts and chats into the token ids the
	// replicas compute; nil routes text requests as if they had no prefix.
	Tokenizer *tokenizer.Tokenizer
	// HealthInterval is how often each replica's /health is polled; 0
	// means one second, < 0 turns polling off.
	HealthInterval time.Duration
	// MaxBodyBytes bounds a request body (413 beyond it); 0 means 8 MiB.
	MaxBodyBytes int64
	// Transport carries the requests to the replicas; nil uses a transport
	// made for many concurrent streams to few hosts.
	Transport http.RoundTripper
	// Slots is how many slots each replica has (llama-server's -np). With
	// Slots > 0 and a SlotPolicy, the router also picks the slot and sends
	// it as id_slot (slots.go); 0 sends every body as it came.
	Slots int
	// WarmSlots lets the router copy a slot's KV from one replica to
	// another (POST /slots/{id}?action=save, then restore) when the policy
	// places a request away from its prefix's replica (Decision.Overflow).
	// The replicas must share their --slot-save-path.
	WarmSlots bool

	// The timeouts of one attempt at a replica (resilience.go): dialing it
	// (0: 5 s; only on the router's own transport), its response headers
	// (0: 600 s, llama-server's --timeout; a JSON answer's headers come
	// with the whole answer), and the wait between two reads of its answer
	// (0: 120 s).
	ConnectTimeout, ResponseTimeout, IdleTimeout time.Duration
	// Retries bounds the other replicas a request that failed before its
	// first byte is tried on; 0 means 2, < 0 none.
	Retries int
	// EjectAfter failures in a row eject a replica for EjectTime (0: 30 s),
	// the n-th ejection in a row n times longer, at most MaxEjectTime
	// (0: 300 s); 0 means 5, < 0 never ejects. MaxEjectPercent bounds the
	// share of the fleet ejected at once (0: 10 %; at least one replica).
	EjectAfter              int
	EjectTime, MaxEjectTime time.Duration
	MaxEjectPercent         int
}

// Router is the HTTP front end. Start its health checker with Run.
type Router struct {
	opts     Options
	client   *http.Client
	replicas []*replica
	mu       sync.Mutex // guards the replicas' up and load
	metrics  *routerMetrics
	reg      *prometheus.Registry
	mux      map[string]route
	warmed   atomic.Int64 // slot copies that succeeded
	warmSeq  int          // numbers the warm-ups; guarded by mu
	pendSeq  uint64       // numbers the attempts not yet relayed; guarded by mu
}

type route map[string]func(w http.ResponseWriter, r *http.Request) // by method

// allow lists the methods a route answers, for a 405's Allow header.
func (rt route) allow() string { return strings.Join(slices.Sorted(maps.Keys(rt)), ", ") }

// replica is one replica as the router sees it.
type replica struct {
	index int
	url   string
	up    bool  // taking requests; guarded by Router.mu
	load  int   // requests in flight; guarded by Router.mu
	slots []int // requests in flight per slot (Options.Slots); guarded by Router.mu
	// Outlier ejection (resilience.go), guarded by Router.mu: failed
	// attempts in a row, ejections in a row, and the end of the current one.
	failures, ejections int
	ejectedUntil        time.Time
	// pending cancels the attempts at the replica that nothing of has
	// reached the client yet, by number; guarded by Router.mu.
	pending map[uint64]context.CancelCauseFunc
}

// New returns a router over opts.Replicas, all of them taken to be up until
// a request or a health check says otherwise.
func New(opts Options) (*Router, error) {
	if len(opts.Replicas) == 0 {
		return nil, errors.New("router: no replicas")
	}
	if opts.Policy == nil {
		return nil, errors.New("router: no policy")
	}
	if opts.Slots < 0 {
		return nil, fmt.Errorf("router: Slots must be ≥ 0, have %d", opts.Slots)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = time.Second
	}
	if err := resilienceDefaults(&opts); err != nil {
		return nil, err
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			Proxy:               nil, // the replicas are reached directly
			DialContext:         (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // compression would hold events back
		}
	}
	rt := &Router{opts: opts, client: &http.Client{Transport: opts.Transport}, reg: prometheus.NewRegistry()}
	for i, u := range opts.Replicas {
		rt.replicas = append(rt.replicas, &replica{index: i, url: strings.TrimRight(u, "/"), up: true, slots: make([]int, max(opts.Slots, 0))})
	}
	rt.metrics = newRouterMetrics(rt.reg, rt)
	rt.mux = map[string]route{
		"/v1/completions":                   {http.MethodPost: rt.proxy},
		"/v1/chat/completions":              {http.MethodPost: rt.proxy},
		"/completion":                       {http.MethodPost: rt.proxy},
		"/v1/models":                        {http.MethodGet: rt.anyReplica},
		"/props":                            {http.MethodGet: rt.anyReplica, http.MethodPost: rt.anyReplica},
		"/lora-adapters":                    {http.MethodGet: rt.anyReplica, http.MethodPost: rt.anyReplica},
		"/tokenize":                         {http.MethodPost: rt.anyReplica},
		"/detokenize":                       {http.MethodPost: rt.anyReplica},
		"/apply-template":                   {http.MethodPost: rt.anyReplica},
		"/v1/chat/completions/input_tokens": {http.MethodPost: rt.anyReplica},
		"/health":                           {http.MethodGet: rt.health},
		"/v1/health":                        {http.MethodGet: rt.health},
		"/metrics":                          {http.MethodGet: promhttp.HandlerFor(rt.reg, promhttp.HandlerOpts{}).ServeHTTP},
	}
	// llama-server's other names of these endpoints are routed as the
	// endpoint itself (canonicalPath), and its endpoints a replica answers
	// with 501 or 400 (embeddings, reranking, infill, setting /props or
	// LoRA adapters) go to any replica, so a client gets the replica's own
	// answer.
	for alias, path := range pathAliases {
		rt.mux[alias] = rt.mux[path]
	}
	for _, path := range []string{"/embedding", "/embeddings", "/v1/embeddings", "/rerank", "/reranking", "/v1/rerank", "/v1/reranking", "/infill"} {
		rt.mux[path] = route{http.MethodPost: rt.anyReplica}
	}
	return rt, nil
}

// pathAliases are llama-server's other names of an endpoint: /completions
// is its own /completion, not OpenAI's /v1/completions.
var pathAliases = map[string]string{
	"/completions":                   "/completion",
	"/chat/completions":              "/v1/chat/completions",
	"/chat/completions/input_tokens": "/v1/chat/completions/input_tokens",
	"/models":                        "/v1/models",
}

// canonicalPath is path under the name the router and every replica know.
func canonicalPath(path string) string {
	if p, ok := pathAliases[path]; ok {
		return p
	}
	return path
}

// ServeHTTP routes a request to its endpoint.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	e, ok := rt.mux[path]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
		return
	}
	serve, ok := e[r.Method]
	if !ok {
		w.Header().Set("Allow", e.allow())
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; use "+e.allow())
		return
	}
	serve(w, r)
}

// Run polls every replica's /health until ctx ends: a replica that fails
// is taken out, one that answers 200 again is put back.
func (rt *Router) Run(ctx context.Context) {
	if rt.opts.HealthInterval < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(rt.opts.HealthInterval)
	defer t.Stop()
	for {
		rt.CheckHealth(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckHealth asks every replica's /health once and updates who is up.
func (rt *Router) CheckHealth(ctx context.Context) {
	var wg sync.WaitGroup
	for _, rep := range rt.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			err := rt.probe(cctx, rep)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				rt.markDown(rep.index, err)
				if errors.Is(err, context.DeadlineExceeded) {
					// A replica that cannot answer /health in time is
					// hung: its requests would wait for their response
					// timeout. Those that nothing reached the client of
					// yet are moved now. (One that refuses the probe is
					// gone or draining: its requests fail, or finish,
					// on their own.)
					rt.cancelPending(rep.index)
				}
			} else {
				rt.markUp(rep.index)
			}
		}()
	}
	wg.Wait()
}

func (rt *Router) probe(ctx context.Context, rep *replica) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rep.url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := rt.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health answered %d", resp.StatusCode)
	}
	return nil
}

// markDown takes a replica out of the fleet and tells the policy, which
// forgets what it knew of the replica's cache.
func (rt *Router) markDown(i int, why error) {
	rt.mu.Lock()
	was := rt.replicas[i].up
	rt.replicas[i].up = false
	rt.mu.Unlock()
	if was {
		rt.metrics.downs.WithLabelValues(strconv.Itoa(i)).Inc()
		rt.opts.Policy.Down(i)
	}
}

// markUp puts a replica back.
func (rt *Router) markUp(i int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.replicas[i].up = true
}

// Up reports which replicas are taking requests.
func (rt *Router) Up() []bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]bool, len(rt.replicas))
	for i, r := range rt.replicas {
		out[i] = r.up
	}
	return out
}

// InFlight returns the requests the router is relaying now. A client
// that has read its last event may be done before the router has read the
// replica's end of stream and counted the request; wait for 0 before
// reading Stats.
func (rt *Router) InFlight() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, r := range rt.replicas {
		n += r.load
	}
	return n
}

// candidates returns the healthy replicas not in skip, with their loads:
// those not ejected, or if every one up is ejected, the ejected ones
// (better tried than refusing the request).
func (rt *Router) candidates(skip map[int]bool) []Candidate {
	now := time.Now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out, ejected []Candidate
	for _, r := range rt.replicas {
		if !r.up || skip[r.index] {
			continue
		}
		if r.ejectedAt(now) {
			ejected = append(ejected, Candidate{Replica: r.index, Load: r.load})
			continue
		}
		out = append(out, Candidate{Replica: r.index, Load: r.load})
	}
	if len(out) == 0 && !rt.anyTakingLocked(now) {
		return ejected
	}
	return out
}

// anyTakingLocked reports whether some replica is up and not ejected;
// rt.mu is held.
func (rt *Router) anyTakingLocked(now time.Time) bool {
	for _, r := range rt.replicas {
		if r.up && !r.ejectedAt(now) {
			return true
		}
	}
	return false
}

// addLoad changes a replica's in-flight count.
func (rt *Router) addLoad(i, d int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.replicas[i].load += d
}

func (rt *Router) health(w http.ResponseWriter, r *http.Request) {
	n := 0
	for _, up := range rt.Up() {
		if up {
			n++
		}
	}
	if n == 0 {
		writeError(w, http.StatusServiceUnavailable, "no_replica", "no replica is up")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "replicas_up": n, "replicas": len(rt.replicas)})
}

// models relays the first healthy replica's model list: the fleet serves
// one model.
// anyReplica answers a request every replica answers alike — the model
// list, llama-server's /props, /tokenize, /detokenize and /apply-template
// (the replicas serve one model) — from the first replica up that answers
// it, status and body as that replica gave them. /slots is not here: slot
// ids are each replica's own.
func (rt *Router) anyReplica(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rt.opts.MaxBodyBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), rt.opts.ResponseTimeout)
	defer cancel()
	for _, c := range rt.candidates(nil) {
		req, err := http.NewRequestWithContext(ctx, r.Method, rt.replicas[c.Replica].url+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			continue
		}
		for _, h := range []string{"Content-Type", "Authorization", "X-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := rt.client.Do(req)
		if err != nil {
			continue // down, or going: try the next
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
			continue // a 501 is the replica's answer (a feature it lacks), not a failure
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.Header().Set(ReplicaHeader, strconv.Itoa(c.Replica))
		w.WriteHeader(resp.StatusCode)
		w.Write(out)
		return
	}
	writeError(w, http.StatusServiceUnavailable, "no_replica", "no replica answered "+r.URL.Path)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// errorBody is the OpenAI error object, as the replicas send it.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func newErrorBody(code, msg string) errorBody {
	var e errorBody
	e.Error.Message, e.Error.Type, e.Error.Code = msg, "server_error", code
	if code == "not_found" || code == "method_not_allowed" || code == "body_too_large" {
		e.Error.Type = "invalid_request_error"
	}
	return e
}

// writeError writes an error in the replicas' shape.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, newErrorBody(code, msg))
}
