package cli

import (
	"bytes"
	"strings"
	"testing"

	"kvlab/common/kvcache"
)

// cachingVariant is testVariant with a prefix cache that finds nothing and
// keeps nothing: enough for trace-example to run.
var cachingVariant = Variant{Name: "testcmd", Summary: "test", PrefixCache: func(*kvcache.Allocator, int) kvcache.PrefixCache { return nothingCache{} }}

type nothingCache struct{}

func (nothingCache) Match(int, string, []int32) ([]int32, int)          { return nil, 0 }
func (nothingCache) MatchLen(string, []int32) int                       { return 0 }
func (nothingCache) Insert(_ int, _ string, _, _ []int32, lent int) int { return lent }
func (nothingCache) Release(int)                                        {}
func (nothingCache) Evict(int) int                                      { return 0 }
func (nothingCache) Evictable() int                                     { return 0 }
func (nothingCache) Holds(int32) int                                    { return 0 }
func (nothingCache) Stats() kvcache.CacheStats                          { return kvcache.CacheStats{} }

// TestTraceGoesToStderr: -trace prints each step on stderr and leaves
// stdout exactly what generate prints without it; -trace=full adds the
// pool's state.
func TestTraceGoesToStderr(t *testing.T) {
	dir := smallModel(t, "llama")
	args := []string{"generate", "-model", dir, "-prompt", "5,6,7,8,9", "-max-tokens", "2", "-ignore-eos", "-block-size", "4", "-n", "2", "-temperature", "1"}
	_, plain, _ := run(args...)
	code, stdout, stderr := run(append(args, "-trace")...)
	if code != 0 || stdout != plain {
		t.Fatalf("with -trace: exit %d, stdout %q; without: %q", code, stdout, plain)
	}
	for _, want := range []string{"step 1: r0 prefill [0,5)\n", "  alloc   r0: [0 1]\n", "  fork    r0 → r0.1: shares pages [0 1]\n", "  cow     r0 page 1: block 1 is shared, copied to 2\n", "step 2: r0 decode @5, r0.1 decode @5\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-trace: no %q in\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "blocks:") {
		t.Errorf("-trace without full dumped the pool:\n%s", stderr)
	}
	_, _, full := run(append(args, "-trace=full")...)
	if !strings.Contains(full, "  | blocks: 1022 free, 2 held, 0 cached (of 1024)\n") {
		t.Errorf("-trace=full: no pool state in\n%s", full)
	}
}

// TestTraceExample runs the worked example through a variant's cache and
// refuses a variant without one.
func TestTraceExample(t *testing.T) {
	dir := smallModel(t, "llama")
	var o, e bytes.Buffer
	if code := Main(cachingVariant, []string{"trace-example", "-model", dir}, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	for _, want := range []string{"submit r4: 11 tokens", "fork    r4 → r4.1", "finish r4: output"} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("no %q in\n%s", want, o.String())
		}
	}
	if code, _, stderr := run("trace-example", "-model", dir); code != 1 || !strings.Contains(stderr, "has none") {
		t.Errorf("without a cache: exit %d, %s", code, stderr)
	}
}

// TestTraceRefusesURL: with -url the engine runs in the server, so there is
// nothing here to trace.
func TestTraceRefusesURL(t *testing.T) {
	code, _, stderr := run("bench", "-url", "http://127.0.0.1:1", "-trace")
	if code != 1 || !strings.Contains(stderr, "run bench without -url") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
