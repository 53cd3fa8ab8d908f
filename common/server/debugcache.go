package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/kvcache/misses"
)

// DebugCache serves the prefix cache's structure live (serve's
// -debug-cache): GET /debug/cache.json, the tree as data with the pool's
// counts beside it; GET /debug/cache, a page that draws it; and GET
// /debug/cache/events, a server-sent-event stream of the same JSON each
// time it changes (debugcache_hub.go). It is off unless Options.DebugCache
// is set: the routes are then unknown paths, answered 404.
//
// Only the engine's goroutine may read the cache, so every view is taken
// there (engine.Server.Do), between two steps, and costs the engine the
// walk over the nodes: MaxNodes bounds it, and one view at a time is taken
// however many ask (the page's clients share the hub's, the JSON's callers
// share one in flight).
type DebugCache struct {
	// MaxNodes is the most nodes a view carries; the rest are counted in
	// View.Truncated. 0 means DefaultDebugCacheMaxNodes.
	MaxNodes int
	// Timeout is how long a request waits for the engine's loop to take a
	// view before it is answered 503. 0 means 2 s.
	Timeout time.Duration
	// Interval is how often the hub checks for a change. 0 means 200 ms.
	Interval time.Duration
	// MaxSubscribers bounds the open event streams; one more is refused
	// with 503. 0 means DefaultDebugCacheSubscribers.
	MaxSubscribers int

	es     *engine.Server
	ghosts func() ghost.Report

	mu     sync.Mutex
	flight *viewFlight // the view being taken, nil when none
	last   []byte      // the latest document, without its seq
	seq    uint64      // bumped each time the document differs from last
	hub    debugHub    // debugcache_hub.go

	views atomic.Int64 // views taken on the engine's loop, for tests
}

// DefaultDebugCacheMaxNodes is DebugCache.MaxNodes' default.
const DefaultDebugCacheMaxNodes = 2000

// DefaultDebugCacheSubscribers is DebugCache.MaxSubscribers' default.
const DefaultDebugCacheSubscribers = 16

// bind fills the defaults and attaches d to the handler's engine.
func (d *DebugCache) bind(h *Handler) {
	if d.MaxNodes <= 0 {
		d.MaxNodes = DefaultDebugCacheMaxNodes
	}
	if d.Timeout <= 0 {
		d.Timeout = 2 * time.Second
	}
	if d.Interval <= 0 {
		d.Interval = 200 * time.Millisecond
	}
	if d.MaxSubscribers <= 0 {
		d.MaxSubscribers = DefaultDebugCacheSubscribers
	}
	d.es, d.ghosts = h.es, h.opts.Ghosts
	d.hub.subs, d.hub.quit = make(map[*debugSub]struct{}), make(chan struct{})
	h.mux["/debug/cache.json"] = route{http.MethodGet: d.serveJSON}
	h.mux["/debug/cache"] = route{http.MethodGet: d.servePage}
	h.mux["/debug/cache/events"] = route{http.MethodGet: h.debugEvents}
}

// debugDoc is the document of /debug/cache.json and of each event, but for
// its "seq", which goes first (debugPayload).
type debugDoc struct {
	View   kvcache.View   `json:"view"`
	Pool   debugPool      `json:"pool"`
	Tiers  []debugTier    `json:"tiers"`
	Misses map[string]int `json:"misses"` // prompt tokens computed, by why they missed (misses.Names)
	Hits   debugHits      `json:"hits"`
	Ghosts *debugGhosts   `json:"ghosts,omitempty"`
}

// debugPool is the KV pool's counts, in blocks (but Live).
type debugPool struct {
	Total   int `json:"total"`
	Free    int `json:"free"`    // on the allocator's free list
	Cached  int `json:"cached"`  // referenced by the prefix cache
	Evicted int `json:"evicted"` // evicted by the prefix cache so far
	Live    int `json:"live"`    // sequences holding blocks
}

// debugTier is one cache tier's kvcache.TierStats, with what the pool
// promoted from it.
type debugTier struct {
	Name      string `json:"name"`
	Blocks    int    `json:"blocks"`
	Bytes     int64  `json:"bytes"`
	Capacity  int64  `json:"capacity"`
	Puts      int    `json:"puts"`
	Hits      int    `json:"hits"`
	Evictions int    `json:"evictions"`
	Dropped   int    `json:"dropped"`
	Corrupt   int    `json:"corrupt"`
	Promoted  int    `json:"promoted"`
	Skipped   int    `json:"skipped"`
}

// debugHits is the engine's count of prompt tokens looked up in the prefix
// cache at first admission, and of those found there.
type debugHits struct {
	Queried int `json:"queried"`
	Cached  int `json:"cached"`
}

// debugGhosts is Options.Ghosts' report: what each eviction policy would
// have hit on the same traffic ("real" is the cache that serves).
type debugGhosts struct {
	Queried int64           `json:"queried"`
	Rows    []debugGhostRow `json:"rows"`
}

type debugGhostRow struct {
	Name    string  `json:"name"`
	Hits    int64   `json:"hits"`
	HitRate float64 `json:"hit_rate"`
	Evicted int64   `json:"evicted"`
	Cached  int     `json:"cached"`
}

// errNoDescribe is a design that cannot show itself (no
// kvcache.Describer): the page has nothing to draw.
type errNoDescribe struct{ design string }

func (e errNoDescribe) Error() string {
	return fmt.Sprintf("the prefix cache %s does not describe its structure (it implements no kvcache.Describer), so /debug/cache has nothing to draw", e.design)
}

var errNoPrefixCache = errors.New("this server runs without a prefix cache; start it with -prefix-caching to see one at /debug/cache")

// errLoopBusy is a view the engine's loop did not take within Timeout.
var errLoopBusy = errors.New("the engine's loop did not take a view of the cache in time; try again")

// viewFlight is one view being taken: whoever asks meanwhile waits for
// the same one.
type viewFlight struct {
	done    chan struct{}
	payload []byte // the document with its seq
	seq     uint64
	err     error
}

// take returns the current document as JSON with its seq. The view is
// taken on the engine's loop; a caller that finds one being taken waits
// for that one. After Timeout it gives up with errLoopBusy (the view goes
// on and is kept for the next caller).
func (d *DebugCache) take() ([]byte, uint64, error) {
	d.mu.Lock()
	f := d.flight
	if f == nil {
		f = &viewFlight{done: make(chan struct{})}
		d.flight = f
		go d.fly(f)
	}
	d.mu.Unlock()
	t := time.NewTimer(d.Timeout)
	defer t.Stop()
	select {
	case <-f.done:
		return f.payload, f.seq, f.err
	case <-t.C:
		return nil, 0, errLoopBusy
	}
}

// fly takes f's view and publishes it.
func (d *DebugCache) fly(f *viewFlight) {
	doc, err := d.collect()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flight = nil
	if err == nil {
		var body []byte
		if body, err = json.Marshal(doc); err == nil {
			if !bytes.Equal(body, d.last) {
				d.last = body
				d.seq++
			}
			f.payload, f.seq = debugPayload(d.seq, body), d.seq
		}
	}
	f.err = err
	close(f.done)
}

// debugPayload is body, a JSON object, with "seq" put first.
func debugPayload(seq uint64, body []byte) []byte {
	out := make([]byte, 0, len(body)+32)
	out = append(out, `{"seq":`...)
	out = strconv.AppendUint(out, seq, 10)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}

// collect takes the view and the counts on the engine's loop, and the
// ghosts' report (which has its own lock) after.
func (d *DebugCache) collect() (*debugDoc, error) {
	doc := &debugDoc{}
	err := d.es.Do(func(e *engine.Engine) error {
		p := e.Pool()
		c := p.Cache()
		if c == nil {
			return errNoPrefixCache
		}
		v, ok := describeCache(c, d.MaxNodes)
		if !ok {
			return errNoDescribe{designName(c)}
		}
		d.views.Add(1)
		if v.Nodes == nil {
			v.Nodes = []kvcache.ViewNode{} // a reader finds a list, empty
		}
		doc.View = v
		a := p.Allocator()
		cs := c.Stats()
		doc.Pool = debugPool{Total: a.Total(), Free: a.NumFree(), Cached: cs.Blocks, Evicted: cs.Evicted, Live: p.Live()}
		tc := p.TierCounters()
		for i, t := range p.Tiers() {
			s := t.Stats()
			dt := debugTier{Name: s.Name, Blocks: s.Blocks, Bytes: s.Bytes, Capacity: s.Capacity, Puts: s.Puts, Hits: s.Hits, Evictions: s.Evictions, Dropped: s.Dropped, Corrupt: s.Corrupt}
			if i < len(tc.Promoted) {
				dt.Promoted = tc.Promoted[i]
			}
			if i < len(tc.Skipped) {
				dt.Skipped = tc.Skipped[i]
			}
			doc.Tiers = append(doc.Tiers, dt)
		}
		st := e.Stats()
		doc.Misses = make(map[string]int, len(misses.Names))
		for i, n := range st.Misses.Counts() {
			doc.Misses[misses.Names[i]] = n
		}
		doc.Hits = debugHits{Queried: st.QueriedTokens, Cached: st.CachedTokens}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if doc.Tiers == nil {
		doc.Tiers = []debugTier{}
	}
	if d.ghosts != nil {
		r := d.ghosts()
		g := &debugGhosts{Queried: r.Queried, Rows: []debugGhostRow{}}
		for _, row := range r.Rows {
			g.Rows = append(g.Rows, debugGhostRow{Name: row.Name, Hits: row.Hits, HitRate: row.HitRate, Evicted: row.Evicted, Cached: row.Cached})
		}
		doc.Ghosts = g
	}
	return doc, nil
}

// debugError is the answer to a view that could not be taken: 501 for a
// server with nothing to describe, 503 for a loop that is busy or gone.
func debugError(err error) *apiError {
	var nd errNoDescribe
	switch {
	case errors.As(err, &nd), errors.Is(err, errNoPrefixCache):
		return errNotSupported(err.Error())
	case errors.Is(err, engine.ErrStopped):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"}
	default:
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "busy", Message: err.Error()}
	}
}

// serveJSON is GET /debug/cache.json.
func (d *DebugCache) serveJSON(w http.ResponseWriter, r *http.Request) {
	payload, _, err := d.take()
	if err != nil {
		e := debugError(err)
		if e.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(payload)
}
