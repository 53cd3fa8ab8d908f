package kvcache

// The pool keeps every block of a sequence in every layer. With a sliding
// window (Gemma-3's local layers), a layer never reads a key again once it
// is older than the window of every query still to come; the functions
// below count what a pool that freed such blocks per layer would hold.
// They are arithmetic on sequence lengths: nothing is freed.

// WindowBlocks returns the blocks of blockSize one layer holds for a
// complete sequence of n positions (0…n−1) when it frees every block no
// query of the sequence can read again: the blocks overlapping the last
// query's window, positions max(0, n−window) … n−1. A window of 0 (a
// global layer) holds all ⌈n/blockSize⌉ blocks.
func WindowBlocks(n, blockSize, window int) int {
	if n <= 0 {
		return 0
	}
	if window <= 0 || window >= n {
		return (n + blockSize - 1) / blockSize
	}
	first := (n - window) / blockSize
	last := (n - 1) / blockSize
	return last - first + 1
}

// LayerBlocks returns the blocks a sequence of n positions holds over all
// layers (windows[l] is layer l's window, 0 for a global layer): keepAll
// under the pool's rule (every layer keeps every block), freed when each
// local layer holds only WindowBlocks.
func LayerBlocks(n, blockSize int, windows []int) (keepAll, freed int) {
	for _, w := range windows {
		keepAll += WindowBlocks(n, blockSize, 0)
		freed += WindowBlocks(n, blockSize, w)
	}
	return keepAll, freed
}
