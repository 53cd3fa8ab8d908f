package main

import (
	"flag"
	"path/filepath"
	"testing"

	"kvlab/common/trace/tracetest"
	"kvlab/phase08_compressed/trie"
)

var update = flag.Bool("update", false, "rewrite testdata/trace.golden and the doc's figure from what the code prints now")

// TestTraceGolden: the worked example's trace is exactly
// testdata/trace.golden (tracetest.Golden). go test -run TestTraceGolden
// -update rewrites it.
func TestTraceGolden(t *testing.T) {
	tracetest.Golden(t, trie.PrefixCache, filepath.Join("testdata", "trace.golden"), *update)
}

// TestTraceCommitMoment: a request arriving mid-prefill finds the system
// prompt only with per-chunk commits (tracetest.CommitMoment).
func TestTraceCommitMoment(t *testing.T) { tracetest.CommitMoment(t, trie.PrefixCache) }

// TestTraceFigure: docs/img/phase08-trace-compressed.svg, the figure sequence
// docs/phase08_trace.md shows, is exactly what the worked example draws on
// the built-in model. -update rewrites it.
func TestTraceFigure(t *testing.T) {
	tracetest.Figure(t, trie.PrefixCache, "phase08_compressed: the worked example, step by step",
		filepath.Join("..", "docs", "img", "phase08-trace-compressed.svg"), *update)
}
