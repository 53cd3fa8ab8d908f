package cachetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"kvlab/common/kvcache"
)

// DescribeIsConsistent checks a cache's View (kvcache.DescribeCache)
// against the cache itself, over a random salted workload under eviction
// pressure, with forks and decodes:
//
//   - after every operation the view is well formed (CheckView): IDs
//     unique, parents first, tokens and refs of every block as the
//     allocator and a walk of MatchLen see them, one node per cached block,
//     Stats().Blocks in all, salts kept apart, ranks 0..k-1;
//   - truncated views are prefixes of the whole one;
//   - Describe has no side effect: the same workload run without it
//     matches, evicts and counts exactly the same;
//   - EvictRank is the design's own order: at checkpoints, Evict(1) until
//     nothing is left takes the ranked nodes in rank order, and no other.
//
// The cache's AuditCache is not run, so that lazy bookkeeping (a queue to
// settle) is seen by Describe as it is.
func DescribeIsConsistent(t *testing.T, f Factory) {
	t.Helper()
	describeIsConsistent(t, f, true)
}

// DescribeIsWellFormed is DescribeIsConsistent without the check of the
// eviction order: for a view whose EvictRank is documented as close to,
// not exactly, Evict's order (ShareCapped in front of the trie, whose
// nodes leave a block at a time).
func DescribeIsWellFormed(t *testing.T, f Factory) {
	t.Helper()
	describeIsConsistent(t, f, false)
}

func describeIsConsistent(t *testing.T, f Factory, order bool) {
	t.Helper()
	for seed := range uint64(4) {
		ops := describeOps(seed)
		with := runDescribeOps(t, f, ops, func(h *Harness, step int) {
			v := CheckView(h)
			for _, max := range []int{1, len(v.Nodes) / 2, len(v.Nodes) + 1} {
				if max == 0 {
					continue
				}
				cut, _ := kvcache.DescribeCache(h.Cache, max)
				keep := min(max, len(v.Nodes))
				if len(cut.Nodes) != keep || cut.Truncated != len(v.Nodes)-keep || !sameNodes(cut.Nodes, v.Nodes[:keep]) {
					h.T.Fatalf("step %d: Describe(%d) is not the first %d nodes of Describe(0) with the rest counted (truncated %d)", step, max, max, cut.Truncated)
				}
			}
		}, -1)
		without := runDescribeOps(t, f, ops, nil, -1)
		if !slices.Equal(with, without) {
			for i := range min(len(with), len(without)) {
				if with[i] != without[i] {
					t.Fatalf("seed %d: Describe changed the cache: step %d is %q with Describe calls, %q without", seed, i, with[i], without[i])
				}
			}
			t.Fatalf("seed %d: Describe changed the cache: %d steps with it, %d without", seed, len(with), len(without))
		}
		for k := 10; order && k < len(ops); k += 23 {
			runDescribeOps(t, f, ops, nil, k)
		}
	}
}

// describeOp is one step of DescribeIsConsistent's workload.
type describeOp struct {
	kind   int // 0 start, 1 commit, 2 release, 3 fork, 4 extend, 5 evict
	id, to int
	salt   string
	tokens []int32
	n      int
}

func describeOps(seed uint64) []describeOp {
	rng := rand.New(rand.NewPCG(seed, 0xd5c))
	bases := [][]int32{Tokens(0, 20), Tokens(5000, 12), Tokens(9000, 6)}
	salts := []string{"", "", "a", "b"}
	var ops []describeOp
	var live []int
	next := 0
	for range 200 {
		op := describeOp{kind: rng.IntN(6)}
		if len(live) >= 4 && (op.kind == 0 || op.kind == 3) {
			op.kind = 2 // keep room in the pool: most steps cache, evict and match
		}
		if op.kind == 0 || len(live) == 0 {
			base := bases[rng.IntN(len(bases))]
			op = describeOp{kind: 0, id: next, salt: salts[rng.IntN(len(salts))],
				tokens: Join(base[:rng.IntN(len(base)+1)], Tokens(20000+rng.IntN(4)*9, 1+rng.IntN(9)))}
			live = append(live, next)
			next++
			ops = append(ops, op)
			continue
		}
		i := rng.IntN(len(live))
		op.id = live[i]
		switch op.kind {
		case 2:
			live = slices.Delete(live, i, i+1)
		case 3:
			op.to = next
			live = append(live, next)
			next++
		case 4:
			op.tokens = Tokens(30000+rng.IntN(3), 1+rng.IntN(5))
		case 5:
			op.n = 1 + rng.IntN(4)
		}
		ops = append(ops, op)
	}
	for _, id := range live {
		ops = append(ops, describeOp{kind: 2, id: id})
	}
	return ops
}

// runDescribeOps runs ops on a fresh pool of 28 blocks, calling each
// after every step, and returns what every step did: cached tokens,
// blocks evicted, the cache's stats and which blocks it holds. With stop
// >= 0 it runs ops[:stop] only and then checks the eviction order.
func runDescribeOps(t *testing.T, f Factory, ops []describeOp, each func(h *Harness, step int), stop int) []string {
	t.Helper()
	h := NewHarness(t, f, 28, 4)
	h.noCacheAudit = true
	open := map[int]bool{}
	var log []string
	if stop >= 0 {
		ops = ops[:stop]
	}
	for step, op := range ops {
		res := 0
		switch {
		case op.kind == 0:
			res = h.StartSalted(op.id, op.salt, op.tokens)
			if res >= 0 {
				open[op.id] = true
			}
		case !open[op.id]:
			res = -2 // it never opened, or is gone
		case op.kind == 1:
			h.Commit(op.id)
		case op.kind == 2:
			h.Release(op.id)
			delete(open, op.id)
		case op.kind == 3:
			if h.Pool.Allocator().NumFree() < 2 {
				res = -3
				break
			}
			h.Fork(op.id, op.to)
			open[op.to] = true
		case op.kind == 4:
			if !h.Extend(op.id, op.tokens) {
				res = -1
			}
		case op.kind == 5:
			res = h.Cache.Evict(op.n)
		}
		holds := make([]int, h.Pool.Allocator().Total())
		for b := range holds {
			holds[b] = h.Cache.Holds(int32(b))
		}
		log = append(log, fmt.Sprintf("op %d: %d, %+v, holds %v", op.kind, res, h.Cache.Stats(), holds))
		if each != nil {
			each(h, step)
		}
	}
	if stop >= 0 {
		CheckEvictRank(h)
	}
	return log
}

// CheckView describes h's cache and checks the view against the cache and
// the pool, failing h's test where they disagree; it returns the view.
func CheckView(h *Harness) kvcache.View {
	h.T.Helper()
	v, ok := kvcache.DescribeCache(h.Cache, 0)
	if !ok {
		h.T.Fatal("the cache does not describe itself (kvcache.DescribeCache)")
	}
	if again, _ := kvcache.DescribeCache(h.Cache, 0); !sameNodes(again.Nodes, v.Nodes) {
		h.T.Fatal("two Describe calls in a row disagree")
	}
	a := h.Pool.Allocator()
	if v.Truncated != 0 || v.BlockSize != h.BlockSize || v.Design == "" {
		h.T.Fatalf("view: design %q, block size %d, truncated %d; want a name, %d, 0", v.Design, v.BlockSize, v.Truncated, h.BlockSize)
	}
	at := map[int]int{} // ID → index
	path := [][]int32{} // index → tokens from its root
	salt := []string{}  // index → its root's salt
	seen := map[int32]bool{}
	var ranks []int
	for i, n := range v.Nodes {
		if _, dup := at[n.ID]; dup {
			h.T.Fatalf("node %d: ID %d used twice", i, n.ID)
		}
		at[n.ID] = i
		if len(n.Blocks) == 0 || len(n.Tokens) != len(n.Blocks)*h.BlockSize || len(n.Refs) != len(n.Blocks) {
			h.T.Fatalf("node %d: %d blocks, %d tokens, %d refs", n.ID, len(n.Blocks), len(n.Tokens), len(n.Refs))
		}
		var p []int32
		s := n.Salt
		if n.Parent != -1 {
			pi, ok := at[n.Parent]
			if !ok {
				h.T.Fatalf("node %d: parent %d does not come before it", n.ID, n.Parent)
			}
			p, s = path[pi], salt[pi]
			if n.Salt != s {
				h.T.Fatalf("node %d: salt %q under a root of salt %q", n.ID, n.Salt, s)
			}
		}
		path = append(path, Join(p, n.Tokens))
		salt = append(salt, s)
		for j, b := range n.Blocks {
			if seen[b] {
				h.T.Fatalf("node %d: block %d appears twice in the view", n.ID, b)
			}
			seen[b] = true
			if n.Refs[j] != a.Refs(b) {
				h.T.Fatalf("node %d: block %d refs %d, the allocator counts %d", n.ID, b, n.Refs[j], a.Refs(b))
			}
		}
		if n.Users < 0 || n.Users > h.Pool.Live() {
			h.T.Fatalf("node %d: %d users, with %d sequences live", n.ID, n.Users, h.Pool.Live())
		}
		if n.EvictRank >= 0 {
			ranks = append(ranks, n.EvictRank)
		} else if n.EvictRank != -1 {
			h.T.Fatalf("node %d: evict rank %d", n.ID, n.EvictRank)
		}
	}
	slices.Sort(ranks)
	for i, r := range ranks {
		if r != i {
			h.T.Fatalf("evict ranks %v: want 0..%d, each once", ranks, len(ranks)-1)
		}
	}
	if len(seen) != h.Cache.Stats().Blocks {
		h.T.Fatalf("view: %d blocks; Stats counts %d", len(seen), h.Cache.Stats().Blocks)
	}
	for b := range int32(a.Total()) {
		if h.Cache.Holds(b) > 0 != seen[b] {
			h.T.Fatalf("block %d: the cache holds %d references, in the view %v", b, h.Cache.Holds(b), seen[b])
		}
	}
	if err := h.Pool.Audit().Err(); err != nil {
		h.T.Fatal(err)
	}
	// Every node the view shows is what MatchLen finds along its path.
	// Only a hash index may show blocks no walk reaches: one whose parent
	// was evicted first (a root of its own), a copy computed twice and
	// forgotten, and what hangs under those.
	reach := make([]bool, len(v.Nodes))
	for i, n := range v.Nodes {
		got := h.Pool.MatchLen(salt[i], path[i])
		reach[i] = got == len(path[i]) && (n.Parent == -1 || reach[at[n.Parent]])
		if !reach[i] && v.Design != "blockhash" {
			h.T.Fatalf("node %d (salt %q): MatchLen of its %d-token path is %d", n.ID, salt[i], len(path[i]), got)
		}
	}
	// And what MatchLen finds for each open prompt is the longest run of
	// whole blocks it shares with a path of the view.
	for id, prompt := range h.prompts {
		deepest := 0
		for i := range v.Nodes {
			if reach[i] && salt[i] == h.salts[id] {
				deepest = max(deepest, floorBlocks(commonPrefix(path[i], prompt), h.BlockSize))
			}
		}
		if got := h.Pool.MatchLen(h.salts[id], prompt); got != deepest {
			h.T.Fatalf("sequence %d: MatchLen %d, the view's deepest path along its prompt %d", id, got, deepest)
		}
	}
	return v
}

// CheckEvictRank describes h's cache, then calls Evict(1) until it frees
// nothing, and fails h's test unless the nodes lose their blocks (the
// cache stops holding them) in the order of their EvictRank, first block
// first, and exactly the ranked nodes lose any.
func CheckEvictRank(h *Harness) {
	h.T.Helper()
	v := CheckView(h)
	owner := map[int32]int{} // block → node index
	for i, n := range v.Nodes {
		for _, b := range n.Blocks {
			owner[b] = i
		}
	}
	touched := make([]bool, len(v.Nodes))
	last := -1
	for {
		freed := h.Cache.Evict(1)
		var now []int
		for b, i := range owner {
			if h.Cache.Holds(b) == 0 && !touched[i] {
				touched[i] = true
				now = append(now, v.Nodes[i].EvictRank)
			}
		}
		slices.Sort(now)
		for _, r := range now {
			if r <= last {
				h.T.Fatalf("Evict(1) took a node of rank %d after one of rank %d (ranks taken now %v)", r, last, now)
			}
			last = r
		}
		if freed == 0 {
			break
		}
	}
	for i, n := range v.Nodes {
		if touched[i] != (n.EvictRank >= 0) {
			h.T.Fatalf("node %d (rank %d): evicted %v by Evict(1) until nothing was left", n.ID, n.EvictRank, touched[i])
		}
	}
}

func sameNodes(a, b []kvcache.ViewNode) bool {
	return slices.EqualFunc(a, b, func(x, y kvcache.ViewNode) bool {
		return x.ID == y.ID && x.Parent == y.Parent && x.Salt == y.Salt && x.Users == y.Users && x.EvictRank == y.EvictRank &&
			slices.Equal(x.Tokens, y.Tokens) && slices.Equal(x.Blocks, y.Blocks) && slices.Equal(x.Refs, y.Refs)
	})
}
