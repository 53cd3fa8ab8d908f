package kvcache

import (
	"container/list"
	"fmt"
	"sync"

	"kvlab/common/kvevents"
)

// RAMTier keeps demoted blocks in host memory under a byte budget
// (llama-server's --cache-ram), evicting the least recently used: a Put or
// a Get makes a block the most recent. What it evicts goes to Next, the
// tier below (a disk), or is dropped.
//
// LRU is what vLLM's CPU offloading uses by default and what SGLang's host
// cache evicts by; both also offer more (vLLM an ARC policy, SGLang write
// policies). A prefix evicted from the pool was the pool's least useful, so
// in the tier recency is most of what is known about it.
//
// Its methods are safe for concurrent use: metrics read Stats from another
// goroutine.
type RAMTier struct {
	Next Tier // where evicted blocks go; nil drops them

	mu       sync.Mutex
	capacity int64
	bytes    int64
	lru      *list.List // of *TierBlock, most recent first
	byHash   map[kvevents.Hash]*list.Element
	stats    TierStats
	sink     func(kvevents.Event) // SetEventSink's; nil: no events
}

// NewRAMTier returns an empty tier of capacity bytes.
func NewRAMTier(capacity int64, next Tier) *RAMTier {
	return &RAMTier{Next: next, capacity: capacity, lru: list.New(), byHash: make(map[kvevents.Hash]*list.Element)}
}

// Name is vLLM's name of host memory.
func (t *RAMTier) Name() string { return "CPU" }

// Put stores b as the most recent block, evicting the least recent ones
// until it fits; a block larger than the whole budget is passed on.
func (t *RAMTier) Put(b TierBlock) {
	t.mu.Lock()
	_, had := t.byHash[b.Hash]
	if had {
		t.removeLocked(t.byHash[b.Hash])
	}
	if b.Size() > t.capacity {
		t.stats.Dropped++
		sink := t.sink
		t.mu.Unlock()
		if had && sink != nil {
			sink(RemovedEvent(b.Hash, t.Name()))
		}
		t.passOn([]TierBlock{b})
		return
	}
	var out []TierBlock
	for t.bytes+b.Size() > t.capacity {
		e := t.lru.Back()
		out = append(out, *e.Value.(*TierBlock))
		t.removeLocked(e)
		t.stats.Evictions++
	}
	t.byHash[b.Hash] = t.lru.PushFront(&b)
	t.bytes += b.Size()
	t.stats.Puts++
	sink := t.sink
	t.mu.Unlock()
	// Outside the lock: the observer's queue, and the next tier, which
	// may take its time.
	if sink != nil {
		for _, o := range out {
			sink(RemovedEvent(o.Hash, t.Name()))
		}
		if !had {
			sink(StoredEvent(&b, t.Name()))
		}
	}
	t.passOn(out)
}

// SetEventSink implements TierEvents.
func (t *RAMTier) SetEventSink(sink func(kvevents.Event)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sink = sink
}

// StoredEvents implements TierEvents: the blocks held, least recent first.
func (t *RAMTier) StoredEvents() []kvevents.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]kvevents.Event, 0, t.lru.Len())
	for e := t.lru.Back(); e != nil; e = e.Prev() {
		out = append(out, StoredEvent(e.Value.(*TierBlock), t.Name()))
	}
	return out
}

func (t *RAMTier) passOn(bs []TierBlock) {
	if t.Next == nil {
		return
	}
	for _, b := range bs {
		t.Next.Put(b)
	}
}

func (t *RAMTier) removeLocked(e *list.Element) {
	b := t.lru.Remove(e).(*TierBlock)
	delete(t.byHash, b.Hash)
	t.bytes -= b.Size()
}

// Get returns block h and makes it the most recent. A block whose KV fails
// its checksum is dropped and not returned.
func (t *RAMTier) Get(h kvevents.Hash) (TierBlock, bool) {
	t.mu.Lock()
	e, ok := t.byHash[h]
	if !ok {
		t.mu.Unlock()
		return TierBlock{}, false
	}
	b := e.Value.(*TierBlock)
	if !b.Intact() {
		t.stats.Corrupt++
		t.removeLocked(e)
		sink := t.sink
		t.mu.Unlock()
		if sink != nil {
			sink(RemovedEvent(h, t.Name()))
		}
		return TierBlock{}, false
	}
	t.lru.MoveToFront(e)
	t.stats.Hits++
	out := *b
	t.mu.Unlock()
	return out, true
}

// Has reports whether h is held, without touching its recency.
func (t *RAMTier) Has(h kvevents.Hash) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byHash[h]
	return ok
}

// Stats reports the tier's counters.
func (t *RAMTier) Stats() TierStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Name, s.Blocks, s.Bytes, s.Capacity = t.Name(), t.lru.Len(), t.bytes, t.capacity
	return s
}

// AuditTier implements TierAuditor: the index and the recency list hold
// the same blocks, their sizes sum to the bytes counted, within the
// budget, and every block's KV matches its checksum.
func (t *RAMTier) AuditTier() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lru.Len() != len(t.byHash) {
		return fmt.Errorf("%d blocks in the recency list, %d in the index", t.lru.Len(), len(t.byHash))
	}
	var bytes int64
	for e := t.lru.Front(); e != nil; e = e.Next() {
		b := e.Value.(*TierBlock)
		if t.byHash[b.Hash] != e {
			return fmt.Errorf("block %s is not indexed where it is listed", b.Hash)
		}
		if !b.Intact() {
			return fmt.Errorf("block %s: its KV does not match its checksum", b.Hash)
		}
		bytes += b.Size()
	}
	if bytes != t.bytes || bytes > t.capacity {
		return fmt.Errorf("blocks of %d bytes, %d counted, a budget of %d", bytes, t.bytes, t.capacity)
	}
	return nil
}

// Drain passes every block the tier holds to Next, least recent first, and
// empties the tier: a shutdown sends the host-memory tier down to a disk
// that outlives the process. Without Next it only empties the tier.
func (t *RAMTier) Drain() {
	t.mu.Lock()
	var out []TierBlock
	for e := t.lru.Back(); e != nil; e = t.lru.Back() {
		out = append(out, *e.Value.(*TierBlock))
		t.removeLocked(e)
	}
	sink := t.sink
	t.mu.Unlock()
	if sink != nil {
		for _, b := range out {
			sink(RemovedEvent(b.Hash, t.Name()))
		}
	}
	t.passOn(out)
}
