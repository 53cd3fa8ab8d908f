package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestVerifyCollectorReportsTheEngineCounts: the three verification
// series are the engine's Stats, as the snapshot carries them.
func TestVerifyCollectorReportsTheEngineCounts(t *testing.T) {
	snap := engine.Snapshot{Stats: engine.Stats{VerifyChecked: 7, VerifyFailed: 2, VerifySkipped: 3}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(verifyCollector{func() engine.Snapshot { return snap }})
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
	}
	require.Equal(t, map[string]float64{
		"kvlab:prefix_cache_verified_total":        7,
		"kvlab:prefix_cache_verify_failures_total": 2,
		"kvlab:prefix_cache_verify_skipped_total":  3,
	}, got)
}
