package router

import (
	"sync"

	"kvlab/common/kvevents"
)

// KVIndex is what each replica says its prefix cache holds, learned from
// its KV events: the set of block hashes it announced as stored and has not
// announced as removed. The router computes a request's block hashes the
// way the replicas do (KVIndex.Hasher) and asks how many leading
// ones each replica holds.
//
// Unlike the prefix policy's tree this is not a guess about what was
// routed where: a block a replica evicted is gone from the index as soon as
// its BlockRemoved arrives. It lags instead: a prompt being prefilled right
// now is announced only when its blocks are committed.
type KVIndex struct {
	// Hasher names a prompt's blocks as the replicas name them in their
	// events (algorithm, seed, LoRA name); the zero Hasher is serve's
	// default. Set it before the first Match.
	Hasher kvevents.Hasher

	mu        sync.Mutex
	held      map[int]map[kvevents.Hash]struct{} // replica → hashes it holds
	live      map[int]bool                       // replica → a batch arrived since the last Reset
	blockSize int                                // from the events; the configured one until then
}

// NewKVIndex returns an empty index. blockSize is the replicas' block size
// until their events say otherwise.
func NewKVIndex(blockSize int) *KVIndex {
	return &KVIndex{held: map[int]map[kvevents.Hash]struct{}{}, live: map[int]bool{}, blockSize: blockSize}
}

// Apply folds one batch of replica's events into the index, in order.
func (x *KVIndex) Apply(replica int, b kvevents.Batch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	set := x.held[replica]
	if set == nil {
		set = map[kvevents.Hash]struct{}{}
		x.held[replica] = set
	}
	x.live[replica] = true
	for _, ev := range b.Events {
		switch ev.Type {
		case kvevents.BlockStored:
			if ev.BlockSize > 0 {
				x.blockSize = ev.BlockSize
			}
			for _, h := range ev.BlockHashes {
				set[h] = struct{}{}
			}
		case kvevents.BlockRemoved:
			for _, h := range ev.BlockHashes {
				delete(set, h)
			}
		case kvevents.AllBlocksCleared:
			clear(set)
		}
	}
}

// Reset forgets everything replica announced: its stream broke, and the
// snapshot that opens the next connection will say it all again.
func (x *KVIndex) Reset(replica int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.held, replica)
	delete(x.live, replica)
}

// Live reports whether a batch from replica has arrived since its stream
// last (re)connected: until then the index knows nothing of it.
func (x *KVIndex) Live(replica int) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.live[replica]
}

// Blocks returns how many blocks replica is known to hold.
func (x *KVIndex) Blocks(replica int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.held[replica])
}

// BlockSize is the block size the index hashes prompts with.
func (x *KVIndex) BlockSize() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.blockSize
}

// Match returns, for each replica in cands, how many leading tokens of
// key's prompt it holds: its run of leading block hashes, times the block
// size. The hashes are computed with key's salt, as the replica computed
// its own, so another tenant's blocks never count. A block counts only if
// every block before it counts too, as only a chain from the first block
// can be reused.
func (x *KVIndex) Match(key Key, cands []Candidate) map[int]int {
	x.mu.Lock()
	bs := x.blockSize
	x.mu.Unlock()
	hashes := x.Hasher.BlockHashes(key.Tokens, bs, key.Salt)
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[int]int{}
	for _, c := range cands {
		set := x.held[c.Replica]
		n := 0
		for n < len(hashes) {
			if _, ok := set[hashes[n]]; !ok {
				break
			}
			n++
		}
		if n > 0 {
			out[c.Replica] = n * bs
		}
	}
	return out
}

// kvEventsPolicy routes on the KV index: the replica holding the longest
// run of the prompt's leading blocks, if that is at least threshold of the
// prompt, else the least-loaded one.
type kvEventsPolicy struct {
	index     *KVIndex
	threshold float64
	rot       rotor
}

// NewKVEvents returns the kv-events policy over index.
func NewKVEvents(index *KVIndex, threshold float64) Policy {
	return &kvEventsPolicy{index: index, threshold: threshold}
}

func (p *kvEventsPolicy) Name() string { return "kv-events" }

func (p *kvEventsPolicy) Pick(key Key, cands []Candidate) Decision {
	return pickByMatch(&p.rot, key.Tokens, cands, p.index.Match(key, cands), p.index.Blocks, p.threshold, "kv-match")
}

// Routed learns nothing: the replica's own events will say what it stored.
func (p *kvEventsPolicy) Routed(Key, int) {}

// Down forgets the replica's blocks; if it comes back its snapshot says
// what it holds then.
func (p *kvEventsPolicy) Down(replica int) { p.index.Reset(replica) }
