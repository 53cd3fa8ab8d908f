//go:build linux

package radix

import (
	"flag"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/kernels/cpu"
)

var (
	sweep     = flag.String("sweep", "", "cached-block counts, comma-separated, at which TestScaleSweep measures Evict(64) and Insert by CPU time")
	turnovers = flag.Int("sweep.turnovers", 20, "how many times over TestScaleSweep's Evict batches turn each cache over")
)

// TestScaleSweep measures Evict(64) and an Insert that evicts at each size
// -sweep lists, on the traffic of cachetest.ScaleBenchmarks (64 system
// prompts of 1,024 tokens, suffixes of 256–2,048, blocks of 16), by the
// CPU time of the calling thread: the benchmark reports a mean of wall
// time, which on a shared machine also counts the time other jobs had the
// core. Skipped unless -sweep is given:
//
//	taskset -c 1 go test ./phase08_prefix/radix -run '^TestScaleSweep$' -v -sweep 10000,100000,1000000
//
// Evict runs in batches of 32 calls after a refill with prompts of 64 new
// blocks, as the benchmark does, until the cache has turned over
// -sweep.turnovers times; the log gives the median over the first and the
// last tenth of the batches, and how scattered the lru ring is in block
// ids before and after: the fraction of neighbours on the ring whose
// blocks are not neighbours (docs/phase08_prefix.md, "The compact form").
// Insert is the median of batches of 8 new 2,048-token prompts whose Grow
// evicts, after that.
func TestScaleSweep(t *testing.T) {
	if *sweep == "" {
		t.Skip("no -sweep sizes")
	}
	runtime.LockOSThread() // the thread's CPU clock is the goroutine's
	defer runtime.UnlockOSThread()
	for _, f := range strings.Split(*sweep, ",") {
		target, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		r := sweepAt(t, target, *turnovers)
		t.Logf("blocks=%d Evict(64) %.2f µs → %.2f µs over %d turnovers, ring scattered %.3f → %.3f; Insert %.2f µs (CPU, medians)",
			target, r.evictFirst, r.evictLast, *turnovers, r.scatterFirst, r.scatterLast, r.insert)
	}
}

type sweepResult struct {
	evictFirst, evictLast     float64 // µs per Evict(64), first and last tenth of the batches
	scatterFirst, scatterLast float64 // ring neighbours whose blocks are not, before and after
	insert                    float64 // µs per Insert that evicts
}

// sweepAt fills a cache to target blocks and measures it (TestScaleSweep).
func sweepAt(t *testing.T, target, turnovers int) sweepResult {
	const bs, systems, systemLen = 16, 64, 1_024
	var tree *Tree
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: target + 4_096, BlockSize: bs,
		NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			tree = NewTree(a, bs)
			return tree
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	next := 0
	run := func(prompt []int32) { // as the engine runs a finished request
		id := next
		next++
		if _, err := p.Open(id, "", prompt); err != nil {
			t.Fatal(err)
		}
		if err := p.Grow(id, len(prompt)); err != nil {
			t.Fatal(err)
		}
		p.Commit(id, prompt)
		p.Release(id)
	}
	prompt := func(rng *rand.Rand, suffix int) []int32 {
		if suffix == 0 {
			suffix = 256 + rng.IntN(2_048-256+1)
		}
		return cachetest.Join(cachetest.Tokens(1_000_000*(rng.IntN(systems)+1), systemLen), cachetest.Tokens(1<<30+next<<12, suffix))
	}
	rng := rand.New(rand.NewPCG(1, uint64(target)))
	for tree.Cached() < target {
		run(prompt(rng, 0))
	}
	refill := func() {
		for p.Allocator().NumFree() >= 64 {
			run(prompt(rng, 1_024))
		}
	}
	var r sweepResult
	r.scatterFirst = tree.scatter()
	batches := max(turnovers*target/(32*64), 100)
	var ev, in []float64
	for range batches {
		refill()
		start := threadCPU()
		for range 32 {
			if got := tree.Evict(64); got != 64 {
				t.Fatalf("evicted %d blocks; want 64", got)
			}
		}
		ev = append(ev, (threadCPU()-start).Seconds()*1e6/32)
	}
	r.scatterLast = tree.scatter()
	r.evictFirst, r.evictLast = median(ev[:batches/10]), median(ev[batches-batches/10:])
	for range 1_000 {
		if p.Allocator().NumFree() >= 2*systemLen/bs {
			refill()
		}
		start := threadCPU()
		for range 8 {
			run(cachetest.Join(cachetest.Tokens(1<<29+next<<12, systemLen), cachetest.Tokens(1<<29+next<<12+systemLen, systemLen)))
		}
		in = append(in, (threadCPU()-start).Seconds()*1e6/8)
	}
	r.insert = median(in)
	return r
}

// scatter returns the fraction of neighbours on the lru ring whose blocks
// are not neighbours: 0 when every run of the ring walks memory in order.
func (t *Tree) scatter() float64 {
	pairs, apart := 0, 0
	for n := t.nodes[t.ring].next; t.nodes[n].next != t.ring; n = t.nodes[n].next {
		pairs++
		if d := t.nodes[n].next - n; d != 1 && d != -1 {
			apart++
		}
	}
	return float64(apart) / float64(max(pairs, 1))
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU() time.Duration {
	const threadCPUClock = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, threadCPUClock, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}
