package ghost

import (
	"testing"
	"time"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// rig is a pool whose prefix cache is a radix tree in a Tap, for
// hand-made cases: each use runs one request through it alone (match,
// compute, commit, release), the pool evicting when it is short, and
// returns what every cache found.
type rig struct {
	t     *testing.T
	h     *cachetest.Harness
	tap   *Tap
	next  int
	clock *fakeClock
	last  MatchEvent
}

func newRig(t *testing.T, blocks, bs int, policies ...Policy) *rig {
	t.Helper()
	r := &rig{t: t, clock: &fakeClock{}}
	cfg := Config{Policies: policies, Now: r.clock.now, OnMatch: func(ev MatchEvent) {
		r.last = ev
		r.last.Ghosts = append([]int(nil), ev.Ghosts...)
	}}
	r.h = cachetest.NewHarness(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		r.tap = NewTap(radix.New(a, bs), bs, a.Total(), cfg)
		return r.tap
	}, blocks, bs)
	return r
}

// use runs prompt through the pool under salt and returns the tokens the
// real cache and then each ghost found for it.
func (r *rig) use(salt string, prompt []int32) (real int, ghosts []int) {
	r.t.Helper()
	id := r.next
	r.next++
	if r.h.StartSalted(id, salt, prompt) < 0 {
		r.t.Fatalf("the pool cannot hold a %d-token prompt", len(prompt))
	}
	r.h.Finish(id)
	if err := r.tap.AuditCache(); err != nil {
		r.t.Fatal(err)
	}
	return r.last.Real, r.last.Ghosts
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ at time.Duration }

func (c *fakeClock) now() time.Time          { return time.Unix(1_000_000, 0).Add(c.at) }
func (c *fakeClock) advance(d time.Duration) { c.at += d }
func prompt(base, blocks, bs int) []int32    { return cachetest.Tokens(base, blocks*bs) }
func ghostOf(t *Tap, name string) *cache     { return t.ghosts[indexOf(t, name)] }
func indexOf(t *Tap, name string) int {
	for i, g := range t.ghosts {
		if g.name == name {
			return i
		}
	}
	panic("no ghost " + name)
}
