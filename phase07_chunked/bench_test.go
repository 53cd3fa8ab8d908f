package main

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
)

// BenchmarkEngine is the baseline row of the shared engine benchmarks: the
// same workloads the phase-8 variants run, with no prefix cache.
func BenchmarkEngine(b *testing.B) { cachetest.EngineBenchmarks(b, nil) }
