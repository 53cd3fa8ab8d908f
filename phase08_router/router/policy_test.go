package router

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idle is n replicas with nothing in flight.
func idle(n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Replica: i}
	}
	return out
}

// seq is n tokens start, start+1, ...
func seq(start, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(start + i)
	}
	return out
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestRoundRobinTakesReplicasInTurn(t *testing.T) {
	p := NewRoundRobin()
	var got []int
	for range 7 {
		got = append(got, p.Pick(Key{}, idle(3)).Replica)
	}
	assert.Equal(t, []int{0, 1, 2, 0, 1, 2, 0}, got)
	// Only the healthy replicas are candidates.
	assert.Contains(t, []int{0, 2}, p.Pick(Key{}, []Candidate{{Replica: 0}, {Replica: 2}}).Replica)
}

func TestLeastLoadPicksTheIdlestAndRotatesTies(t *testing.T) {
	p := NewLeastLoad()
	assert.Equal(t, 1, p.Pick(Key{}, []Candidate{{0, 3}, {1, 1}, {2, 2}}).Replica)
	// Requests sent one at a time see every load at 0; they still spread.
	seen := map[int]int{}
	for range 6 {
		seen[p.Pick(Key{}, idle(3)).Replica]++
	}
	assert.Equal(t, map[int]int{0: 2, 1: 2, 2: 2}, seen)
}

func TestPrefixPolicyFollowsTheLongestMatchAboveTheThreshold(t *testing.T) {
	p := NewPrefix(0.5, 0)
	sysA, sysB := seq(1000, 64), seq(2000, 64)
	a1 := cat(sysA, seq(1, 8))
	d := p.Pick(Key{Tokens: a1}, idle(3))
	assert.Equal(t, "least-load", d.Reason, "nothing routed yet")
	p.Routed(Key{Tokens: a1}, d.Replica)
	home := d.Replica

	// Same system prompt, another user: 64 of 72 tokens match.
	a2 := cat(sysA, seq(100, 8))
	d2 := p.Pick(Key{Tokens: a2}, idle(3))
	assert.Equal(t, Decision{Replica: home, Matched: 64, Reason: "prefix-match"}, d2)

	// The same prompt on a busier home still goes home: the match decides,
	// load only breaks ties.
	busy := idle(3)
	busy[home].Load = 5
	assert.Equal(t, home, p.Pick(Key{Tokens: a2}, busy).Replica)

	// A different system prompt matches nothing: least-load.
	b := cat(sysB, seq(1, 8))
	assert.Equal(t, "least-load", p.Pick(Key{Tokens: b}, busy).Reason)

	// A short match (8 of 72 tokens) is under the threshold.
	short := cat(sysA[:8], seq(5000, 64))
	assert.Equal(t, "least-load", p.Pick(Key{Tokens: short}, idle(3)).Reason)

	// A replica that goes down is forgotten.
	p.Down(home)
	assert.Equal(t, "least-load", p.Pick(Key{Tokens: a2}, idle(3)).Reason)
}

func TestTreeMatchesPerReplica(t *testing.T) {
	tr := NewTree(0)
	tr.Insert([]int32{1, 2, 3, 4, 5}, 0)
	tr.Insert([]int32{1, 2, 3, 9}, 1) // splits the edge after 1 2 3
	tr.Insert([]int32{1, 2}, 2)
	assert.Equal(t, map[int]int{0: 5, 1: 3, 2: 2}, tr.Match([]int32{1, 2, 3, 4, 5, 6}))
	assert.Equal(t, map[int]int{0: 3, 1: 4, 2: 2}, tr.Match([]int32{1, 2, 3, 9}))
	assert.Equal(t, map[int]int{0: 1, 1: 1, 2: 1}, tr.Match([]int32{1, 7}))
	assert.Empty(t, tr.Match([]int32{7}))
	assert.Equal(t, 5, tr.Size(0))
	assert.Equal(t, 4, tr.Size(1))

	tr.Remove(1)
	assert.Equal(t, map[int]int{0: 3, 2: 2}, tr.Match([]int32{1, 2, 3, 9}))
}

// TestTreeSplitReparentsGrandchildren splits an edge whose node already
// has children: the children must hang below the new tail, or evicting
// them walks up to the wrong node.
func TestTreeSplitReparentsGrandchildren(t *testing.T) {
	tr := NewTree(0)
	tr.Insert([]int32{1, 2, 3, 4}, 0)
	tr.Insert([]int32{1, 2, 3, 4, 5, 6}, 0)
	tr.Insert([]int32{1, 2, 7}, 0) // splits 1 2 3 4 after 1 2
	var check func(n *node)
	check = func(n *node) {
		for k, c := range n.children {
			require.Same(t, n, c.parent, "child %d of a node points at another parent", k)
			require.Equal(t, k, c.edge[0])
			check(c)
		}
	}
	check(tr.root)
}

// TestTreeEvictsTheLeastRecentlyRoutedLeaves bounds one replica to 10
// tokens: the oldest branch goes first, the shared stem stays while a
// branch below it is still held, and other replicas keep their marks.
func TestTreeEvictsTheLeastRecentlyRoutedLeaves(t *testing.T) {
	tr := NewTree(10)
	stem := seq(1, 4)
	old, mid, fresh := cat(stem, seq(100, 3)), cat(stem, seq(200, 3)), cat(stem, seq(300, 3))
	tr.Insert(old, 0)
	tr.Insert(old, 1)
	tr.Insert(mid, 0) // 4 + 3 + 3 = 10 tokens: fits
	assert.Equal(t, 10, tr.Size(0))
	tr.Insert(fresh, 0) // 13: the oldest leaf (old's branch) goes
	assert.Equal(t, 10, tr.Size(0))
	assert.Equal(t, map[int]int{0: 4, 1: 7}, tr.Match(old), "replica 1 still holds old")
	assert.Equal(t, map[int]int{0: 7, 1: 4}, tr.Match(mid), "replica 1 holds the stem")
	assert.Equal(t, map[int]int{0: 7, 1: 4}, tr.Match(fresh))

	// Touching mid makes fresh the oldest.
	tr.Insert(mid, 0)
	tr.Insert(cat(stem, seq(400, 3)), 0)
	assert.Equal(t, map[int]int{0: 7, 1: 4}, tr.Match(mid))
	assert.Equal(t, map[int]int{0: 4, 1: 4}, tr.Match(fresh))
	assert.Equal(t, 10, tr.Size(0))
}

func TestPickByMatchBreaksTiesByLoad(t *testing.T) {
	var rot rotor
	prompt := seq(0, 10)
	cands := []Candidate{{0, 4}, {1, 1}, {2, 0}}
	d := pickByMatch(&rot, prompt, cands, map[int]int{0: 8, 1: 8, 2: 2}, func(int) int { return 0 }, 0.5, "prefix-match")
	if diff := cmp.Diff(Decision{Replica: 1, Matched: 8, Reason: "prefix-match"}, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
}
