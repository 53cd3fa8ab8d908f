package cachetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
)

// failTB records the first failure Watch reports and stops the operation
// that caused it, as t.Fatalf would stop a test.
type failTB struct {
	testing.TB
	msg string
}

func (f *failTB) Helper() {}

func (f *failTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// forgetful is the naive cache with a bug chosen by the test: it forgets
// every cached prefix of prompt when another prompt is committed
// (onInsert), or when sequence onRelease is released.
type forgetful struct {
	*naive
	prompt    []int32
	onInsert  bool
	onRelease int
}

func (c *forgetful) drop() {
	for end := c.bs; end <= len(c.prompt); end += c.bs {
		delete(c.entries, saltKey("", c.prompt[:end])) // its reference leaks: Watch must speak first
	}
}

func (c *forgetful) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	lent = c.naive.Insert(seq, salt, tokens, pages, lent)
	if c.onInsert && keyOf(tokens) != keyOf(c.prompt) {
		c.drop()
	}
	return lent
}

func (c *forgetful) Release(seq int) {
	c.naive.Release(seq)
	if seq == c.onRelease {
		c.drop()
	}
}

// watchFailure runs story against a Watch over a forgetful cache and
// returns what Watch reported ("" for nothing).
func watchFailure(t *testing.T, onInsert bool, onRelease int, story func(h *Harness)) (msg string) {
	a := Tokens(100, 8)
	tb := &failTB{TB: t}
	f := func(al *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &forgetful{naive: newNaive(al, bs).(*naive), prompt: a, onInsert: onInsert, onRelease: onRelease}
	}
	h := NewHarness(t, Watch(tb, f), 16, 4)
	defer func() {
		if r := recover(); r != nil && r != any(tb) {
			panic(r)
		}
		msg = tb.msg
	}()
	story(h)
	return ""
}

func TestWatchCatchesACommitThatLowersMatchLen(t *testing.T) {
	story := func(h *Harness) {
		h.Start(1, Tokens(100, 8))
		h.Finish(1)
		h.Start(2, Tokens(500, 8))
		h.Finish(2) // the forgetful cache drops the first prompt here
	}
	require.Equal(t, "", watchFailure(t, false, -1, story), "a correct cache")
	require.Equal(t,
		"cache invariant: commit of 8 tokens by sequence 2 lowered MatchLen of the earlier commit [100 101 102 103 104 105 106 107] (salt \"\") from 8 to 0, evicting nothing",
		watchFailure(t, true, -1, story))
}

func TestWatchCatchesALentPrefixThatStopsMatching(t *testing.T) {
	story := func(h *Harness) {
		h.Start(1, Tokens(100, 8))
		h.Finish(1)
		h.Start(2, Tokens(100, 8)) // lent all 8 tokens, and stays live
		h.Start(3, Tokens(500, 4))
		h.Release(3) // the forgetful cache drops the first prompt here
	}
	require.Equal(t, "", watchFailure(t, false, -1, story), "a correct cache")
	require.Equal(t,
		"cache invariant: after release of sequence 3: MatchLen of the 8 tokens lent to live sequence 2 is 0",
		watchFailure(t, false, 3, story))
}
