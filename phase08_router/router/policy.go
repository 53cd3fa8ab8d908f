package router

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Candidate is a replica a policy may choose: its index in the fleet and
// the requests the router has in flight on it.
type Candidate struct {
	Replica int
	Load    int
}

// Decision is a policy's choice for one request.
type Decision struct {
	// Replica is the index of the chosen replica.
	Replica int
	// Matched is how many prompt tokens the policy believes the replica
	// already holds: its guess (prefix) or what the replica said it holds
	// (kv-events). The replica's reply says what it really found.
	Matched int
	// Reason labels the decision in the router's metrics: round-robin,
	// least-load, prefix-match, kv-match or prefix-overflow.
	Reason string
	// Overflow says the prompt's prefix lives on replica Home, which had no
	// free slot, so the request was placed on Replica instead; the router
	// may warm Replica with Home's slot (save there, restore here) first.
	Overflow bool
	Home     int
}

// Policy chooses a replica for each request. The router calls Pick with
// the healthy replicas only, never with none, then Routed once the request
// has been sent to the replica Pick chose, and Down when a replica leaves
// the fleet. Implementations are safe for concurrent use.
type Policy interface {
	Name() string
	Pick(key Key, cands []Candidate) Decision
	Routed(key Key, replica int)
	Down(replica int)
}

// Policies lists the policy names --policy accepts.
var Policies = []string{"round-robin", "least-load", "prefix", "kv-events"}

// roundRobin sends request k to the k-th healthy replica, in turn.
type roundRobin struct{ next atomic.Uint64 }

// NewRoundRobin returns the round-robin policy.
func NewRoundRobin() Policy { return &roundRobin{} }

func (p *roundRobin) Name() string { return "round-robin" }

func (p *roundRobin) Pick(_ Key, cands []Candidate) Decision {
	k := p.next.Add(1) - 1
	return Decision{Replica: cands[k%uint64(len(cands))].Replica, Reason: "round-robin"}
}

func (p *roundRobin) Routed(Key, int) {}
func (p *roundRobin) Down(int)        {}

// leastLoad sends each request to the replica with the fewest requests in
// flight. Among equally loaded replicas it rotates, so that requests sent
// one at a time (every load 0) still spread over the fleet instead of all
// going to replica 0.
type leastLoad struct{ rot rotor }

// NewLeastLoad returns the least-load policy.
func NewLeastLoad() Policy { return &leastLoad{} }

func (p *leastLoad) Name() string { return "least-load" }

func (p *leastLoad) Pick(_ Key, cands []Candidate) Decision {
	return Decision{Replica: p.rot.leastLoaded(cands), Reason: "least-load"}
}

func (p *leastLoad) Routed(Key, int) {}
func (p *leastLoad) Down(int)        {}

// rotor breaks ties between equally good replicas by taking them in turn.
type rotor struct{ n atomic.Uint64 }

// leastLoaded returns the replica of cands with the smallest load; ties go
// to the tied replicas in turn.
func (r *rotor) leastLoaded(cands []Candidate) int {
	return r.best(cands, func(c Candidate) [2]int { return [2]int{-c.Load, 0} })
}

// best returns the replica whose key is largest (compared field by field);
// replicas with equal keys are taken in turn.
func (r *rotor) best(cands []Candidate, key func(Candidate) [2]int) int {
	var tied []int
	var bk [2]int
	for i, c := range cands {
		k := key(c)
		switch {
		case i == 0 || k[0] > bk[0] || k[0] == bk[0] && k[1] > bk[1]:
			tied, bk = append(tied[:0], c.Replica), k
		case k == bk:
			tied = append(tied, c.Replica)
		}
	}
	return tied[(r.n.Add(1)-1)%uint64(len(tied))]
}

// prefixPolicy is SGLang's cache-aware routing: a radix tree remembers
// which prompts went to which replica; a request goes to the replica whose
// remembered prompts share the longest prefix with it, if that prefix is
// at least threshold of the prompt, and to the least-loaded replica
// otherwise. What the tree holds is a guess: the replica may have evicted
// the prefix since.
//
// There is one tree per cache salt: a replica never lends one tenant's KV
// to another, so a prefix routed for one salt says nothing about another's.
//
// With slots > 0 (replicas that are llama-server processes, each with that
// many slots) the tree also remembers the last prompt of every slot, and
// the policy names the slot (SlotPolicy); with overflow, a request whose
// prefix's replica has no free slot goes to a replica that has one
// (Decision.Overflow), for the router to warm from the prefix's slot.
type prefixPolicy struct {
	threshold float64
	maxTokens int
	slots     int
	overflow  bool
	rot       rotor

	mu    sync.Mutex
	trees map[string]*Tree // by cache salt; "" for requests without one
}

// NewPrefix returns the prefix policy: each salt's tree remembers at most
// maxTokens tokens per replica, evicting least recently routed leaves.
func NewPrefix(threshold float64, maxTokens int) Policy {
	return &prefixPolicy{threshold: threshold, maxTokens: maxTokens, trees: map[string]*Tree{}}
}

// NewPrefixSlots returns the prefix policy for replicas with slots slots
// each: it also picks the slot (SlotPolicy). With overflow, a request
// whose prefix's replica has every slot busy goes to a replica with a free
// one, marked Overflow, instead of queueing behind its prefix.
func NewPrefixSlots(threshold float64, maxTokens, slots int, overflow bool) SlotPolicy {
	return &prefixPolicy{threshold: threshold, maxTokens: maxTokens, slots: slots, overflow: overflow, trees: map[string]*Tree{}}
}

func (p *prefixPolicy) Name() string { return "prefix" }

// tree returns salt's tree, making it on first use.
func (p *prefixPolicy) tree(salt string) *Tree {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.trees[salt]
	if t == nil {
		t = NewTree(p.maxTokens)
		p.trees[salt] = t
	}
	return t
}

func (p *prefixPolicy) Pick(key Key, cands []Candidate) Decision {
	d := pickByMatch(&p.rot, key.Tokens, cands, p.tree(key.Salt).Match(key.Tokens), p.size, p.threshold, "prefix-match")
	if !p.overflow || p.slots == 0 || d.Reason != "prefix-match" {
		return d
	}
	// The prefix's replica is full when every slot has a request and as
	// many again wait: this one would queue behind them. A replica with a
	// free slot takes it instead. (Moving as soon as every slot is busy
	// moved too much: a slot frees within one request, and a conversation
	// moved off its replica leaves its own KV behind.)
	load := map[int]int{}
	var free []Candidate
	for _, c := range cands {
		load[c.Replica] = c.Load
		if c.Load < p.slots {
			free = append(free, c)
		}
	}
	if load[d.Replica] < 2*p.slots || len(free) == 0 {
		return d
	}
	r := p.rot.best(free, func(c Candidate) [2]int { return [2]int{-c.Load, -p.size(c.Replica)} })
	return Decision{Replica: r, Reason: "prefix-overflow", Overflow: true, Home: d.Replica}
}

func (p *prefixPolicy) Routed(key Key, replica int) { p.tree(key.Salt).Insert(key.Tokens, replica) }

// Down forgets replica in every salt's tree.
func (p *prefixPolicy) Down(replica int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.trees {
		t.Remove(replica)
	}
}

// size is what replica holds over all salts, for balancing new prefixes.
func (p *prefixPolicy) size(replica int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.trees {
		n += t.Size(replica)
	}
	return n
}

// pickByMatch routes to the replica with the longest match, ties to the
// less loaded, when the match is at least threshold of the prompt. Below
// the threshold the request starts a new prefix somewhere: it goes to the
// least-loaded replica, and among equally loaded ones to the one holding
// the least (size), as SGLang balances its trees. Without that second rule
// the new prefixes of a lightly loaded fleet, where every load is 0, land
// wherever the turn happens to be, and one replica can end up with most of
// them.
func pickByMatch(rot *rotor, prompt []int32, cands []Candidate, matched map[int]int, size func(int) int, threshold float64, reason string) Decision {
	best := 0
	for _, c := range cands {
		best = max(best, matched[c.Replica])
	}
	if best > 0 && float64(best) >= threshold*float64(len(prompt)) {
		r := rot.best(cands, func(c Candidate) [2]int { return [2]int{matched[c.Replica], -c.Load} })
		return Decision{Replica: r, Matched: best, Reason: reason}
	}
	r := rot.best(cands, func(c Candidate) [2]int { return [2]int{-c.Load, -size(c.Replica)} })
	return Decision{Replica: r, Matched: matched[r], Reason: "least-load"}
}

// NewPolicy returns the policy named name. threshold and maxTreeTokens
// configure prefix; kv configures kv-events (nil for the others).
func NewPolicy(name string, threshold float64, maxTreeTokens int, kv *KVIndex) (Policy, error) {
	switch name {
	case "round-robin":
		return NewRoundRobin(), nil
	case "least-load":
		return NewLeastLoad(), nil
	case "prefix":
		return NewPrefix(threshold, maxTreeTokens), nil
	case "kv-events":
		if kv == nil {
			return nil, fmt.Errorf("policy kv-events needs a KV event index")
		}
		return NewKVEvents(kv, threshold), nil
	}
	return nil, fmt.Errorf("unknown policy %q (want one of %v)", name, Policies)
}
