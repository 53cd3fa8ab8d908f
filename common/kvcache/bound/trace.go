package bound

import (
	"encoding/binary"
	"fmt"
)

// Trace is a recorded run as the bound reads it: lookups and commits in
// the order the cache saw them, each a chain of whole blocks. Blocks are
// interned as they come: two events name the same block exactly when they
// share its salt and every token up to its end, as the designs key a block
// by its salted chain.
type Trace struct {
	blockSize int

	ids    map[string]int32 // parent (or salt) and the block's tokens → block
	salts  map[string]int32 // salt → the parent the chain's first block is keyed under
	parent []int32          // per block: its parent block, -1 for a chain's first
	depth  []int32          // per block: its index in its chain
	events []event
	chain  []int32 // the events' blocks, event after event
	key    []byte  // scratch for a map key

	lookups      int // lookup events
	promptTokens int // tokens of the lookups' prompts
}

// event is one lookup or commit: its blocks are chain[start:end].
type event struct {
	start, end int32
	lookup     bool
}

// NewTrace returns an empty trace of blocks of blockSize tokens.
func NewTrace(blockSize int) *Trace {
	if blockSize <= 0 {
		panic(fmt.Sprintf("bound: block size must be positive, have %d", blockSize))
	}
	return &Trace{blockSize: blockSize, ids: map[string]int32{}, salts: map[string]int32{}}
}

// BlockSize returns the tokens per block.
func (t *Trace) BlockSize() int { return t.blockSize }

// Lookup records a request's arrival: the cache is asked for the longest
// cached prefix of prompt under salt, and the hit counts. Tokens past the
// last whole block can never hit, as no design caches a partial block.
func (t *Trace) Lookup(salt string, prompt []int32) {
	t.add(salt, prompt, true)
	t.lookups++
	t.promptTokens += len(prompt)
}

// Commit records that the cache was offered the KV of tokens under salt:
// its whole blocks may be cached from then on.
func (t *Trace) Commit(salt string, tokens []int32) { t.add(salt, tokens, false) }

// Lookups returns the number of lookups recorded.
func (t *Trace) Lookups() int { return t.lookups }

// PromptTokens returns the tokens of every recorded lookup's prompt: the
// denominator of a hit rate.
func (t *Trace) PromptTokens() int { return t.promptTokens }

// Blocks returns the number of distinct blocks the trace names.
func (t *Trace) Blocks() int { return len(t.parent) }

func (t *Trace) add(salt string, tokens []int32, lookup bool) {
	root, ok := t.salts[salt]
	if !ok {
		// Salts key first blocks under negative parents, blocks under
		// their (non-negative) parent block: the two never meet.
		root = -1 - int32(len(t.salts))
		t.salts[salt] = root
	}
	start := int32(len(t.chain))
	bs := t.blockSize
	parent := root
	for i := 0; i+bs <= len(tokens); i += bs {
		id := t.intern(parent, tokens[i:i+bs])
		t.chain = append(t.chain, id)
		parent = id
	}
	t.events = append(t.events, event{start: start, end: int32(len(t.chain)), lookup: lookup})
}

// intern returns the id of the block of tokens under parent, a new one if
// no event named it before.
func (t *Trace) intern(parent int32, tokens []int32) int32 {
	k := binary.LittleEndian.AppendUint32(t.key[:0], uint32(parent))
	for _, tok := range tokens {
		k = binary.LittleEndian.AppendUint32(k, uint32(tok))
	}
	t.key = k
	if id, ok := t.ids[string(k)]; ok {
		return id
	}
	id := int32(len(t.parent))
	t.ids[string(k)] = id
	if parent < 0 {
		t.parent = append(t.parent, -1)
		t.depth = append(t.depth, 0)
	} else {
		t.parent = append(t.parent, parent)
		t.depth = append(t.depth, t.depth[parent]+1)
	}
	return id
}

// Request is one request of a run served one after another: its cache
// salt, its prompt, and what it committed when it finished (its prompt and
// the output whose KV it computed, the engine's tokens[:computed]); a nil
// Commit commits the prompt only.
type Request struct {
	Salt   string
	Prompt []int32
	Commit []int32
}

// FromRequests returns the trace of requests served one after another in
// their order: each one's lookup, then its commit.
func FromRequests(blockSize int, reqs []Request) *Trace {
	t := NewTrace(blockSize)
	for _, r := range reqs {
		t.Lookup(r.Salt, r.Prompt)
		c := r.Commit
		if c == nil {
			c = r.Prompt
		}
		t.Commit(r.Salt, c)
	}
	return t
}
