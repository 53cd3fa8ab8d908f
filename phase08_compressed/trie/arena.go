package trie

// An arena hands out the token and block runs of nodes from shared chunks
// instead of one array per run. A full collection marks every object the
// cache holds, on every cycle, and a run is one: a node's tokens and its
// blocks were two arrays of their own, two objects for every leaf. Cut
// from chunks, runs of neighbouring nodes share one object
// (docs/phase08_compressed.md, "What the collector sees").
//
// Nothing else changes: a node's tokens and blocks are still slices, a
// split still reslices them, and they are never written after they are
// cut, so runs that share a chunk never see each other. A run is capped at
// its length: appending to it could never write into a neighbour's.
//
// Space is not reused: a chunk goes back to the collector when the last
// slice into it goes. A node that outlives its neighbours (the head of a
// shared system prompt) keeps its chunk alive, which is why chunks grow
// with the cache, 1/64 of the runs cached, instead of starting large.
type arena struct {
	chunk []int32 // the chunk being filled; len is what was handed out
}

// Chunk sizes, in int32s: a chunk holds at least minChunk and at most
// maxChunk, and a run longer than an eighth of a chunk gets an array of
// its own, so that the end of a chunk a run did not fit in wastes little.
const (
	minChunk = 1 << 10
	maxChunk = 1 << 16
)

// concat returns a run holding the concatenation of parts, cut from the
// current chunk or from a new one of about live/64 int32s (live: how many
// the arena's runs hold now).
func (a *arena) concat(live int, parts ...[]int32) []int32 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	size := min(max(live/64, minChunk), maxChunk)
	if n > size/8 {
		run := make([]int32, 0, n)
		for _, p := range parts {
			run = append(run, p...)
		}
		return run
	}
	if cap(a.chunk)-len(a.chunk) < n {
		a.chunk = make([]int32, 0, size)
	}
	from := len(a.chunk)
	for _, p := range parts {
		a.chunk = append(a.chunk, p...)
	}
	return a.chunk[from:len(a.chunk):len(a.chunk)]
}
