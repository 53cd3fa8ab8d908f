package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleRuns() []*Run {
	return []*Run{
		{
			Name: "baseline",
			Wall: 3 * time.Second,
			Requests: []RequestRecord{
				record(0, 0, 100, 0, 120, 140, 160),
				record(1, 125, 100, 0, 300, 330),
			},
			Engine: EngineStats{Steps: 10, PrefillTokensComputed: 200, PromptTokens: 200, TotalBlocks: 64, MaxRunning: 2},
		},
		{
			Name: "cached",
			Wall: 2 * time.Second,
			Requests: []RequestRecord{
				record(0, 0, 100, 0, 110, 120),
				{ID: 1, PromptLen: 100, Arrival: 125 * time.Millisecond, Finish: 125 * time.Millisecond, Err: "prompt too long"},
			},
			Engine: EngineStats{Steps: 6, PrefillTokensComputed: 100, CachedTokens: 96, PromptTokens: 200},
		},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	runs := sampleRuns()
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, runs))

	have, err := ReadJSON(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	if diff := cmp.Diff(runs, have); diff != "" {
		t.Errorf("round trip mismatch (-want +have):\n%s", diff)
	}
}

func TestJSONCarriesSummaries(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, sampleRuns()))

	var doc []struct {
		Name    string  `json:"name"`
		Summary Summary `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	require.Len(t, doc, 2)
	assert.Equal(t, "cached", doc[1].Summary.Name)
	assert.Equal(t, 1, doc[1].Summary.Failed)
	assert.InDelta(t, 0.48, doc[1].Summary.HitRate, 1e-12)
	assert.Equal(t, 20*time.Millisecond, doc[0].Summary.ITL.P50)
}

func TestWriteJSONRejectsNilRun(t *testing.T) {
	var b bytes.Buffer
	assert.Error(t, WriteJSON(&b, []*Run{nil}))
}
