package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// engineRow is a row of a design doc's BenchmarkEngine table:
//
//	| requests=R/prefix=P | baseline prefill tokens | the design's prefill tokens |
var engineRow = regexp.MustCompile(`(?m)^\| requests=(\d+)/prefix=(\d+) \| (\d+) \| (\d+) \|`)

// TestEngineBenchPrefillCounts serves each design doc's BenchmarkEngine
// workloads once, without a cache and with the design's, and requires the
// doc's prefill-token counts to be what the engine computes now. The
// benchmark submits every request at once, so the counts are the same on
// every machine; only its times are measurements.
func TestEngineBenchPrefillCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("serves the engine benchmark's workloads (a few seconds)")
	}
	designs := []struct {
		doc     string
		factory cachetest.Factory
	}{
		{"docs/phase08_prefix.md", radix.PrefixCache},
		{"docs/phase08_hashcow.md", blockhash.PrefixCache},
		{"docs/phase08_compressed.md", trie.PrefixCache},
	}
	m := cachetest.EngineModel(t)
	baseline := map[[2]int]int{}
	for _, s := range cachetest.EngineSizes {
		baseline[[2]int{s.Requests, s.Prefix}] = cachetest.EnginePrefill(t, m, nil, s.Requests, s.Prefix)
	}
	for _, d := range designs {
		t.Run(filepath.Base(d.doc), func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join(root, d.doc))
			if err != nil {
				t.Fatal(err)
			}
			rows := engineRow.FindAllStringSubmatch(string(doc), -1)
			if len(rows) != len(cachetest.EngineSizes) {
				t.Fatalf("%s has %d BenchmarkEngine rows (| requests=R/prefix=P | baseline | design |); want %d, one per cachetest.EngineSizes", d.doc, len(rows), len(cachetest.EngineSizes))
			}
			for _, r := range rows {
				req, _ := strconv.Atoi(r[1])
				prefix, _ := strconv.Atoi(r[2])
				size := [2]int{req, prefix}
				base, ok := baseline[size]
				if !ok {
					t.Errorf("%s: requests=%d/prefix=%d is not one of cachetest.EngineSizes", d.doc, req, prefix)
					continue
				}
				if have := r[3]; have != strconv.Itoa(base) {
					t.Errorf("%s: requests=%d/prefix=%d baseline prefill: have %s; want %d", d.doc, req, prefix, have, base)
				}
				if have, want := r[4], cachetest.EnginePrefill(t, m, d.factory, req, prefix); have != strconv.Itoa(want) {
					t.Errorf("%s: requests=%d/prefix=%d prefill with the cache: have %s; want %d", d.doc, req, prefix, have, want)
				}
			}
		})
	}
}
