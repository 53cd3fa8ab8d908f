package radix_test

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestConformance runs the suite every prefix cache must pass: audit after
// every operation, and the contents of every lent block checked against
// what computing the prompt would have written.
func TestConformance(t *testing.T) { cachetest.Run(t, radix.New) }
