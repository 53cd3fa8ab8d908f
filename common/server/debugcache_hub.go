package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"kvlab/common/engine"
)

// The event stream of /debug/cache/events: one hub checks for a change
// every DebugCache.Interval while anyone listens, takes ONE view when
// there is one, and hands it to every subscriber. A change is seen in the
// engine's snapshot first (engine.Server.Snapshot, which costs the loop
// nothing): only when the counters moved is a view taken on the loop, so
// an idle server is not walked five times a second, and N pages cost the
// engine what one does.
//
// A subscriber holds at most one view, the latest: the hub replaces an
// unsent one and never waits for a subscriber, and each subscriber's
// writes have the handler's write deadline (Options.WriteTimeout), after
// which its stream ends. A client that stops reading thus costs one
// goroutine for WriteTimeout and delays no one.

// debugHub is DebugCache's subscribers and the hub's state, under
// DebugCache.mu.
type debugHub struct {
	subs      map[*debugSub]struct{}
	running   bool          // the hub goroutine is up
	closed    bool          // Close ran: no more subscribers
	quit      chan struct{} // closed by Close
	latest    []byte        // the latest view the hub handed out, nil when it is not running
	latestSeq uint64
}

// debugSub is one event stream.
type debugSub struct {
	ch   chan []byte // the latest undelivered view; capacity 1
	sent uint64      // seq of the last view put in ch
}

var (
	errTooManyWatchers = errors.New("too many /debug/cache/events streams are open; close one or use /debug/cache.json")
	errDebugClosed     = errors.New("the server is shutting down")
)

// give puts payload in s's slot unless s has it already, replacing an
// older one still there. Call it with DebugCache.mu held: the hub and
// subscribe are the only senders, and both hold it, so the send after the
// drain never blocks.
func (s *debugSub) give(payload []byte, seq uint64) {
	if s.sent == seq {
		return
	}
	select {
	case <-s.ch:
	default:
	}
	s.ch <- payload
	s.sent = seq
}

// subscribe adds a stream, with the current view in its slot. It starts
// the hub if it is not running.
func (d *DebugCache) subscribe() (*debugSub, error) {
	d.mu.Lock()
	if d.hub.closed {
		d.mu.Unlock()
		return nil, errDebugClosed
	}
	if len(d.hub.subs) >= d.MaxSubscribers {
		d.mu.Unlock()
		return nil, errTooManyWatchers
	}
	s := &debugSub{ch: make(chan []byte, 1)}
	d.hub.subs[s] = struct{}{}
	latest, seq := d.hub.latest, d.hub.latestSeq
	d.mu.Unlock()
	if latest == nil { // the hub has none: take one (shared with any taken meanwhile)
		var err error
		if latest, seq, err = d.take(); err != nil {
			d.unsubscribe(s)
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.sent == 0 { // the hub may have handed it a newer one already
		s.give(latest, seq)
	}
	if !d.hub.running && !d.hub.closed {
		d.hub.running = true
		go d.runHub()
	}
	return s, nil
}

func (d *DebugCache) unsubscribe(s *debugSub) {
	d.mu.Lock()
	delete(d.hub.subs, s)
	d.mu.Unlock()
}

// Close ends every event stream and refuses new ones; serve calls it on
// shutdown, so that open pages do not hold the shutdown up.
func (d *DebugCache) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.hub.closed {
		d.hub.closed = true
		close(d.hub.quit)
	}
}

// snapKey is what of the engine's snapshot moves when the cache may have:
// every admission, step, commit, eviction and Do call changes one of them.
type snapKey struct {
	stats                                    engine.Stats
	waiting, running, free, cached, evicted  int
	copies, demoted, kept, tierBlocks, tierP int
}

func keyOf(s engine.Snapshot) snapKey {
	k := snapKey{stats: s.Stats, waiting: s.Waiting, running: s.Running, free: s.FreeBlocks, cached: s.CacheBlocks, evicted: s.Evicted,
		copies: s.Copies, demoted: s.TierCounters.Demoted, kept: s.TierCounters.DemotedKept}
	for _, t := range s.Tiers {
		k.tierBlocks += t.Blocks
		k.tierP += t.Puts + t.Hits
	}
	return k
}

// runHub checks for a change every Interval while there are subscribers,
// and hands each new view to all of them.
func (d *DebugCache) runHub() {
	tick := time.NewTicker(d.Interval)
	defer tick.Stop()
	var key snapKey
	have := false
	for {
		d.mu.Lock()
		if len(d.hub.subs) == 0 || d.hub.closed {
			d.hub.running, d.hub.latest, d.hub.latestSeq = false, nil, 0
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		if k := keyOf(d.es.Snapshot()); !have || k != key {
			payload, seq, err := d.take()
			switch {
			case err == nil:
				key, have = k, true
				d.mu.Lock()
				d.hub.latest, d.hub.latestSeq = payload, seq
				for s := range d.hub.subs {
					s.give(payload, seq)
				}
				d.mu.Unlock()
			case errors.Is(err, engine.ErrStopped):
				d.Close()
			}
			// errLoopBusy: the loop is slow; try again at the next tick.
		}
		select {
		case <-tick.C:
		case <-d.hub.quit:
		}
	}
}

// debugEvents is GET /debug/cache/events: `event: view` with the JSON of
// /debug/cache.json, first the current one, then each time it changes.
func (h *Handler) debugEvents(w http.ResponseWriter, r *http.Request) {
	d := h.opts.DebugCache
	s, err := d.subscribe()
	switch {
	case errors.Is(err, errTooManyWatchers), errors.Is(err, errDebugClosed):
		w.Header().Set("Retry-After", "1")
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Message: err.Error()})
		return
	case err != nil:
		writeError(w, debugError(err))
		return
	}
	defer d.unsubscribe(s)
	w = h.deadlines(w) // a client that stops reading ends its stream after WriteTimeout
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	keep := time.NewTicker(keepAlive)
	defer keep.Stop()
	for {
		var err error
		select {
		case payload := <-s.ch:
			_, err = fmt.Fprintf(w, "event: view\ndata: %s\n\n", payload)
		case <-keep.C:
			_, err = w.Write([]byte(": keep-alive\n\n"))
		case <-d.hub.quit:
			return
		case <-r.Context().Done():
			return
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
