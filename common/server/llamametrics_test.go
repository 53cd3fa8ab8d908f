package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape returns /metrics as series → value, with the response.
func scrape(t *testing.T, url string) (map[string]float64, *http.Response) {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		require.NoError(t, err, line)
		out[name] = v
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "# TYPE llamacpp:") {
			f := strings.Fields(line)
			out["type "+f[2]+" "+f[3]] = 1
		}
	}
	return out, resp
}

// TestLlamaCppMetrics checks llama-server's llamacpp:* series: each is
// there with llama-server's type, and they move as llama-server's do
// after a request: prompt_tokens_total by the prompt's tokens (no prefix
// cache), tokens_predicted_total by the tokens generated. The
// Process-Start-Time-Unix header is the server's start.
func TestLlamaCppMetrics(t *testing.T) {
	tm := loadTestModel(t)
	before := time.Now().Unix()
	ts := startServer(t, tm, engineConfig(false), Options{})
	m0, resp := scrape(t, ts.url)
	start, err := strconv.ParseInt(resp.Header.Get("Process-Start-Time-Unix"), 10, 64)
	require.NoError(t, err, "Process-Start-Time-Unix")
	assert.GreaterOrEqual(t, start, before)
	assert.LessOrEqual(t, start, time.Now().Unix())

	for name, typ := range map[string]string{
		"prompt_tokens_total": "counter", "prompt_tokens_cached_total": "counter", "prompt_seconds_total": "counter",
		"tokens_predicted_total": "counter", "tokens_predicted_seconds_total": "counter", "n_decode_total": "counter",
		"n_tokens_max": "counter", "spec_decode_num_draft_tokens_total": "counter",
		"spec_decode_num_accepted_tokens_total": "counter", "spec_decode_num_drafts_total": "counter",
		"prompt_tokens_seconds": "gauge", "predicted_tokens_seconds": "gauge",
		"requests_processing": "gauge", "requests_deferred": "gauge", "n_busy_slots_per_decode": "gauge",
	} {
		assert.Contains(t, m0, "llamacpp:"+name)
		assert.Contains(t, m0, "type llamacpp:"+name+" "+typ)
	}
	assert.Contains(t, m0, "kvlab:prompt_tokens_total", "the kvlab:* series stay")

	status, body := post(t, ts.url+"/v1/completions", `{"prompt": [1, 2, 3, 4, 5, 6, 7], "max_tokens": 4, "ignore_eos": true}`)
	require.Equal(t, http.StatusOK, status, string(body))
	m1, _ := scrape(t, ts.url)
	assert.Equal(t, 7.0, m1["llamacpp:prompt_tokens_total"]-m0["llamacpp:prompt_tokens_total"])
	assert.Equal(t, 4.0, m1["llamacpp:tokens_predicted_total"]-m0["llamacpp:tokens_predicted_total"])
	assert.Equal(t, 11.0, m1["llamacpp:n_tokens_max"])
	assert.Greater(t, m1["llamacpp:n_decode_total"], m0["llamacpp:n_decode_total"])
	assert.Greater(t, m1["llamacpp:prompt_seconds_total"], 0.0)
	assert.Greater(t, m1["llamacpp:tokens_predicted_seconds_total"], 0.0)
	assert.Greater(t, m1["llamacpp:prompt_tokens_seconds"], 0.0, "the request ended since the last scrape")
	assert.Greater(t, m1["llamacpp:predicted_tokens_seconds"], 0.0)
	assert.Zero(t, m1["llamacpp:requests_processing"])

	// The throughput gauges cover what ended since the previous scrape.
	m2, _ := scrape(t, ts.url)
	assert.Zero(t, m2["llamacpp:prompt_tokens_seconds"])
	assert.Equal(t, m1["llamacpp:prompt_tokens_total"], m2["llamacpp:prompt_tokens_total"])
}

// TestLlamaCppMetricsCountCachedTokensApart: with a prefix cache, the
// tokens a prompt found cached go to prompt_tokens_cached_total and the
// rest to prompt_tokens_total, the same numbers as the answers' timings
// (cache_n, prompt_n), as llama-server's suite checks.
func TestLlamaCppMetricsCountCachedTokensApart(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{})
	processed, cached := 0.0, 0.0
	for range 2 {
		status, body := post(t, ts.url+"/completion", `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "n_predict": 3}`)
		require.Equal(t, http.StatusOK, status, string(body))
		var r struct {
			Timings struct {
				PromptN float64 `json:"prompt_n"`
				CacheN  float64 `json:"cache_n"`
			} `json:"timings"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		processed += r.Timings.PromptN
		cached += r.Timings.CacheN
	}
	require.Equal(t, 8.0, cached, "the second prompt found its two whole blocks")
	m, _ := scrape(t, ts.url)
	assert.Equal(t, processed, m["llamacpp:prompt_tokens_total"])
	assert.Equal(t, cached, m["llamacpp:prompt_tokens_cached_total"])
}
