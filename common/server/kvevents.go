package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// KVEvents publishes what the engine's prefix cache holds: it takes the
// events a kvcache.Observer queues on the engine's goroutine and hands each
// batch to every subscriber of GET /v1/kv_events and to every sink (the
// ZeroMQ publisher, AddPublisher). A batch is whatever queued since the previous one —
// in practice one engine step's worth, since the engine's goroutine queues
// a step's events before this goroutine wakes.
type KVEvents struct {
	obs *kvcache.Observer

	mu     sync.Mutex
	subs   map[chan kvevents.Batch]struct{}
	sinks  []func(kvevents.Batch)
	pubs   []*kvevents.Publisher // for their counters (Collect)
	cut    uint64                // streams ended for falling behind
	closed bool
}

// subscriberBuffer is how many batches a stream may fall behind before it
// is cut off. A subscriber that cannot keep up gets its stream closed rather
// than holding up the others; on reconnecting it starts from the whole
// cache again, so it loses nothing but time. A write to it that takes
// longer than Options.WriteTimeout ends its stream too (kvEventStream), so
// one that stops reading holds neither a goroutine nor the shutdown.
const subscriberBuffer = 1024

// NewKVEvents returns a publisher for obs's events. Call Run.
func NewKVEvents(obs *kvcache.Observer) *KVEvents {
	return &KVEvents{obs: obs, subs: make(map[chan kvevents.Batch]struct{})}
}

// AddPublisher hands every batch to p from now on, and each time p reports
// a subscriber whose subscription has reached it (Subscriptions), one batch
// that describes the whole cache: AllBlocksCleared, then a BlockStored for
// every block held, parents first. That batch goes out in order with the
// live ones — what was queued before it is published first — so a
// subscriber that connects late, or again, starts from the truth. Every
// subscriber gets it (a PUB socket cannot address one); to one that was
// already up to date it is a clear followed by what it knew. logf reports
// publishing errors. Reports stop when p closes.
func (k *KVEvents) AddPublisher(p *kvevents.Publisher, logf func(format string, args ...any)) {
	send := func(b kvevents.Batch) {
		if err := p.Publish(b); err != nil && !errors.Is(err, kvevents.ErrPublisherClosed) {
			logf("publishing KV events: %v", err)
		}
	}
	k.mu.Lock()
	k.sinks = append(k.sinks, send)
	k.pubs = append(k.pubs, p)
	k.mu.Unlock()
	go func() {
		for range p.Subscriptions() {
			k.mu.Lock()
			state := k.publishLocked()
			if !k.closed {
				send(state)
			}
			k.mu.Unlock()
		}
	}()
}

// Run publishes batches as the observer queues events, until ctx is done;
// then it publishes what is left and returns.
func (k *KVEvents) Run(ctx context.Context) {
	for {
		select {
		case <-k.obs.Ready():
			k.mu.Lock()
			k.publishLocked()
			k.mu.Unlock()
		case <-ctx.Done():
			k.mu.Lock()
			k.publishLocked()
			k.mu.Unlock()
			return
		}
	}
}

// Close ends every stream and refuses new subscribers; the server calls it
// on shutdown so that open streams do not hold the shutdown up.
func (k *KVEvents) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.publishLocked()
	k.closed = true
	for ch := range k.subs {
		close(ch)
		delete(k.subs, ch)
	}
}

// publishLocked sends the queued events as one batch to everyone, and
// returns the state of the cache at the same instant as a batch for a
// newcomer.
func (k *KVEvents) publishLocked() kvevents.Batch {
	live, state := k.obs.Drain(true)
	now := unixSeconds()
	if len(live) > 0 {
		b := kvevents.Batch{TS: now, Events: live}
		for ch := range k.subs {
			select {
			case ch <- b:
			default: // too far behind: cut it off (see subscriberBuffer)
				close(ch)
				delete(k.subs, ch)
				k.cut++
			}
		}
		for _, fn := range k.sinks {
			fn(b)
		}
	}
	return kvevents.Batch{TS: now, Events: state}
}

// subscribe returns a stream whose first batch is the whole cache, or nil
// once Close has run.
func (k *KVEvents) subscribe() chan kvevents.Batch {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	state := k.publishLocked()
	ch := make(chan kvevents.Batch, subscriberBuffer)
	ch <- state
	k.subs[ch] = struct{}{}
	return ch
}

func (k *KVEvents) unsubscribe(ch chan kvevents.Batch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.subs[ch]; ok {
		delete(k.subs, ch)
		close(ch)
	}
}

// timedOut counts a stream that ended because a write to its client
// passed the deadline.
func (k *KVEvents) timedOut(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		k.mu.Lock()
		k.cut++
		k.mu.Unlock()
	}
}

func unixSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// keepAlive is how often an idle stream gets an SSE comment, so a router
// notices a dead replica by its read deadline and proxies keep the
// connection open.
const keepAlive = 10 * time.Second

// kvEventStream serves GET /v1/kv_events: a server-sent-event stream of
// JSON kvevents.Batch values (kvevents.ReadStream reads it).
func (h *Handler) kvEventStream(w http.ResponseWriter, r *http.Request) {
	if h.opts.KVEvents == nil {
		writeError(w, errNotFound("KV events are off on this server; start it with --prefix-caching --kv-events"))
		return
	}
	ch := h.opts.KVEvents.subscribe()
	if ch == nil {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
		return
	}
	defer h.opts.KVEvents.unsubscribe(ch)
	w = h.deadlines(w) // a client that stops reading ends its stream after WriteTimeout
	s := newSSE(w)
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case b, ok := <-ch:
			if !ok {
				return // shutdown, or too far behind: the client reconnects
			}
			if err := s.send(b); err != nil {
				h.opts.KVEvents.timedOut(err)
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				h.opts.KVEvents.timedOut(err)
				return
			}
			if s.flusher != nil {
				s.flusher.Flush()
			}
		case <-r.Context().Done():
			return
		}
	}
}

// KVEventsTopic is the ZeroMQ topic llm-d's indexer wants from a server,
// kv@<address:port>@<model>: it keys the pod by the address, so the
// address must be the one its scheduler reaches the server at. advertise is
// that address when set; otherwise listen, the address the server listens
// on, which is refused when it is a wildcard (0.0.0.0, ::), since no
// scheduler reaches a server there. The topic is split on "@", so neither
// part may contain one.
func KVEventsTopic(advertise, listen, model string) (string, error) {
	addr, flag := advertise, "-kv-events-advertise"
	if addr == "" {
		addr, flag = listen, "the listen address"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%s %q is not host:port", flag, addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if advertise == "" {
			return "", fmt.Errorf("the server listens on %s, every interface: the KV event topic must name an address a scheduler reaches it at; pass -kv-events-advertise host:port (or -kv-events-topic)", addr)
		}
		return "", fmt.Errorf("-kv-events-advertise %q names no reachable host", addr)
	}
	if strings.Contains(addr, "@") || strings.Contains(model, "@") {
		return "", fmt.Errorf("the KV event topic kv@%s@%s would not split in three at '@'; pass -kv-events-topic", addr, model)
	}
	return "kv@" + net.JoinHostPort(host, port) + "@" + model, nil
}
