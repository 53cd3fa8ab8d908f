package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// tiersDesigns are the designs under the words phase09_tiers gives them.
var tiersDesigns = []TiersDesign{
	{Flag: "radix", Variant: phase08Variants[0]},
	{Flag: "hashcow", Variant: phase08Variants[1]},
	{Flag: "trie", Variant: phase08Variants[2]},
}

// TestTiersOutputFits120Columns renders the experiment with every design
// (the longest row names), and a table with the llama-server rows, and
// holds every line to 120 columns.
func TestTiersOutputFits120Columns(t *testing.T) {
	dir := smallModel(t, "llama")
	t.Chdir(t.TempDir()) // the plot goes to its default path, out/…
	args := []string{"-model", dir, "-clock", "step:50ms", "-quiet", "-design", "all",
		"-conversations", "4", "-turns", "2", "-prefix-len", "16", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-block-size", "4", "-blocks", "24",
		"-roomy-blocks", "256", "-ram-blocks", "256", "-small-ram-blocks", "8", "-disk-blocks", "256"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Tiers(tiersDesigns, args, &out, &errOut), errOut.String())
	requireFits(t, "phase09_tiers", out.String())
	requireFits(t, "phase09_tiers (stderr)", errOut.String())
	assert.Contains(t, out.String(), "plot: "+filepath.Join("out", "phase09-llama-tiers.svg"), "the default plot is named by the model folder")
	for _, d := range tiersDesigns {
		assert.Contains(t, out.String(), d.Flag+", RAM over disk")
	}

	run := &metrics.Run{Engine: metrics.EngineStats{BlockSize: 16}, Requests: []metrics.RequestRecord{{ID: 0, PromptLen: 100, CachedTokens: 60, FirstToken: 9 * time.Millisecond, Finish: 20 * time.Millisecond, TokenTimes: []time.Duration{9 * time.Millisecond}}}}
	tiered := tierRow{name: "hashcow, RAM over disk", run: run, media: []string{"CPU", "DISK"},
		counters: kvcache.TierCounters{Promoted: []int{12345, 67890}, Skipped: []int{1, 2}, PromoteNanos: []float64{123456, 7654321}, PrefillNanosPerRow: 98765}}
	var table bytes.Buffer
	writeTiersTable(&table, []tierRow{tiered, {name: "llama-server RAM 8193 MiB", run: run, llama: true}})
	requireFits(t, "the table with llama-server's rows", table.String())
	assert.Regexp(t, `12345\s+67890\s+123.5\s+7654.3\s+1580.2\s+3\n`, table.String(), "promoted, µs per block, a block's compute, skipped")
	assert.Regexp(t, `llama-server RAM 8193 MiB\s+60.0\s+40\s`, table.String(), "llama-server's prefill is its prompt less what it found cached")
}

// TestTiersPicksDesignsByName: -design takes one word, several, or all;
// an unknown one is refused with the words it knows.
func TestTiersPicksDesignsByName(t *testing.T) {
	got, err := pickDesigns(tiersDesigns, "trie,radix")
	require.NoError(t, err)
	assert.Equal(t, []string{"trie", "radix"}, []string{got[0].Flag, got[1].Flag})
	got, err = pickDesigns(tiersDesigns, "all")
	require.NoError(t, err)
	assert.Len(t, got, 3)
	_, err = pickDesigns(tiersDesigns, "btree")
	assert.ErrorContains(t, err, `unknown design "btree" (want radix, hashcow, trie, or all)`)

	var out, errOut bytes.Buffer
	assert.Equal(t, 1, Tiers(tiersDesigns, []string{"-workload", "prefix_caching"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-workload: this experiment runs multi_turn only")
}

// fakeLlamaServer answers POST /completion as llama-server streams it:
// one event per token, then an event with stop and timings. answer
// shapes what it sends.
func fakeLlamaServer(t *testing.T, answer func(w http.ResponseWriter, req map[string]any)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/completion" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		answer(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sendEvent(w http.ResponseWriter, ev string) {
	fmt.Fprintf(w, "data: %s\n\n", ev)
	w.(http.Flusher).Flush()
}

// TestTierLlamaCompletionReadsTheStream: the llama-server client sends
// the prompt's ids greedy, with ignore_eos, return_tokens and the ban, and
// reads the ids of every event, stamped where each was read (TTFT is the
// first event's), and the prompt tokens reused from timings.cache_n; a
// stream that breaks, lacks its timings, carries fewer tokens than asked
// or answers an error fails its request, with the tokens that came.
func TestTierLlamaCompletionReadsTheStream(t *testing.T) {
	ban := [][2]any{{7, false}}
	url := fakeLlamaServer(t, func(w http.ResponseWriter, req map[string]any) {
		assert.Equal(t, true, req["ignore_eos"])
		assert.Equal(t, true, req["return_tokens"])
		assert.Equal(t, true, req["stream"])
		assert.EqualValues(t, 1, req["top_k"])
		assert.Equal(t, []any{[]any{7.0, false}}, req["logit_bias"])
		prompt := req["prompt"].([]any)
		switch int(prompt[0].(float64)) {
		case 1: // a whole answer: two events of tokens, then stop
			sendEvent(w, `{"tokens":[11],"stop":false}`)
			time.Sleep(30 * time.Millisecond)
			sendEvent(w, `{"tokens":[12,13],"stop":false}`)
			sendEvent(w, `{"tokens":[],"stop":true,"timings":{"cache_n":2,"prompt_n":1}}`)
		case 2: // no timings
			sendEvent(w, `{"tokens":[11,12,13],"stop":true}`)
		case 3: // one token short
			sendEvent(w, `{"tokens":[11,12],"stop":true,"timings":{"cache_n":0}}`)
		case 4: // broken after a token
			sendEvent(w, `{"tokens":[11],"stop":false}`)
		case 5:
			sendEvent(w, `{"error":{"message":"context full"}}`)
		}
	})
	e := newLlamaCompletion(context.Background(), url, 10*time.Second, ban)
	var reqs []workload.Request
	for i := range 5 {
		reqs = append(reqs, workload.Request{ID: i, Prompt: []int32{int32(i + 1), 3, 4}, MaxTokens: 3})
	}
	run, err := workload.Run(e, reqs, workload.RunOptions{Name: "llama"})
	e.Close()
	require.NoError(t, err)
	ok := run.Requests[0]
	require.Empty(t, ok.Err)
	assert.Equal(t, []int32{11, 12, 13}, ok.Output)
	assert.Equal(t, 2, ok.CachedTokens)
	require.Len(t, ok.TokenTimes, 3)
	// The second event was sent 30 ms after the first: it cannot have been
	// read sooner than that after the request went out.
	assert.GreaterOrEqual(t, ok.TokenTimes[1]-ok.Arrival, 30*time.Millisecond, "each token carries the time its event was read")
	assert.LessOrEqual(t, ok.TokenTimes[0], ok.TokenTimes[1])
	assert.Equal(t, ok.TokenTimes[1], ok.TokenTimes[2], "tokens of one event share its time")
	for id, want := range map[int]string{1: "no timings", 2: "asked for 3 tokens, the stream carried 2", 3: "stream ended before its last event", 4: "server error: context full"} {
		r := run.Requests[id]
		assert.Contains(t, r.Err, want, "request %d", id)
	}
	assert.Equal(t, []int32{11}, run.Requests[3].Output, "the tokens that came before the break still count")
}

// TestTierLlamaServerIsFoundInABuild: llama-server is looked for where a
// llama.cpp build puts it; a folder without one is refused by name.
func TestTierLlamaServerIsFoundInABuild(t *testing.T) {
	dir := t.TempDir()
	_, err := llamaServerIn(dir)
	assert.ErrorContains(t, err, "no llama-server under "+dir)
	require.NoError(t, writeExecutable(dir+"/bin/llama-server"))
	got, err := llamaServerIn(dir)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(got, "bin/llama-server"))
}

func writeExecutable(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755)
}
