package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvevents"
)

// slotServer serves tm with a prefix cache, n slots and slot files in dir.
func slotServer(t *testing.T, tm testModel, n int, dir string) *testServer {
	t.Helper()
	return slotServerConfig(t, tm, engineConfig(true), n, dir)
}

// slotServerConfig is slotServer with the engine's configuration.
func slotServerConfig(t *testing.T, tm testModel, cfg engine.Config, n int, dir string) *testServer {
	t.Helper()
	return startServerFor(t, tm, cfg, engine.Limits{}, func(e *engine.Engine) Options {
		p := e.Pool()
		kv := &CacheFile{
			Identity: CacheIdentity{Model: "test-model", BlockSize: p.BlockSize(), Layers: p.Layers(), KVDim: p.KVDim(), DType: "float32"},
			Pool:     p, Observer: p.Observe(kvevents.DefaultHashSeed), Seed: kvevents.DefaultHashSeed,
		}
		return Options{PrefixCaching: true, Slots: n, SlotSavePath: dir, SlotKV: kv}
	}, nil)
}

func complete(t *testing.T, url string, body map[string]any) llamaResponse {
	t.Helper()
	status, raw := post(t, url+"/completion", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r llamaResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	return r
}

func slotsOf(t *testing.T, url string) []slotJSON {
	t.Helper()
	var s []slotJSON
	getJSON(t, url+"/slots", &s)
	return s
}

// TestSlotChoiceFollowsThePrefix: without id_slot a prompt goes to the slot
// whose last prompt shares the longest prefix with it, else to the least
// recently used; id_slot overrides the choice.
func TestSlotChoiceFollowsThePrefix(t *testing.T) {
	tm := loadTestModel(t)
	ts := slotServer(t, tm, 2, t.TempDir())
	a, b := prompt(12, 1), prompt(12, 2)
	req := func(p []int32, slot int) int {
		return complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 1, "ignore_eos": true, "id_slot": slot}).IDSlot
	}
	assert.Equal(t, 0, req(a, -1), "both empty: the first")
	assert.Equal(t, 1, req(b, -1), "no shared prefix: the least recently used")
	assert.Equal(t, 0, req(append(a[:8:8], 400, 401), -1), "a's prefix is in slot 0")
	assert.Equal(t, 1, req(a, 1), "id_slot decides")

	slots := slotsOf(t, ts.url)
	require.Len(t, slots, 2)
	assert.Equal(t, 12, slots[1].NPrompt)
	assert.False(t, slots[0].IsProcessing)
	assert.Equal(t, 0, slots[1].NextToken[0].NDecoded, "an idle slot forgets its task's budget, as llama-server's")

	status, raw := post(t, ts.url+"/completion", map[string]any{"prompt": a, "id_slot": 2})
	assert.Equal(t, http.StatusBadRequest, status, string(raw))

	// The OpenAI endpoints choose the same way.
	before := slotsOf(t, ts.url)
	status, raw = post(t, ts.url+"/v1/completions", map[string]any{"prompt": a, "max_tokens": 1})
	require.Equal(t, http.StatusOK, status, string(raw))
	after := slotsOf(t, ts.url)
	assert.Equal(t, before[0].IDTask, after[0].IDTask, "slot 0 holds a's prefix only")
	assert.Greater(t, after[1].IDTask, before[1].IDTask, "slot 1 holds a: the request ran there")
}

// TestSlotSaveRestoreWarmsAFreshServer saves a slot's KV on one server and
// restores it on another that never saw the prompt: the prompt is then
// found cached there, and the tokens are the uncached reference's.
func TestSlotSaveRestoreWarmsAFreshServer(t *testing.T) {
	tm := loadTestModel(t)
	dir := t.TempDir()
	p := prompt(18, 5)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 4, IgnoreEOS: true})[1]
	body := map[string]any{"prompt": p, "n_predict": 4, "temperature": 0, "ignore_eos": true, "id_slot": 0}

	src := slotServer(t, tm, 1, dir)
	complete(t, src.url, body)
	var saved struct {
		NSaved   int `json:"n_saved"`
		NWritten int `json:"n_written"`
	}
	status, raw := post(t, src.url+"/slots/0?action=save", map[string]any{"filename": "p.bin"})
	require.Equal(t, http.StatusOK, status, string(raw))
	require.NoError(t, json.Unmarshal(raw, &saved))
	assert.Equal(t, 16, saved.NSaved, "the 4 whole blocks of the 18-token prompt")
	assert.Positive(t, saved.NWritten)

	dst := slotServer(t, tm, 2, dir)
	status, raw = post(t, dst.url+"/slots/1?action=restore", map[string]any{"filename": "p.bin"})
	require.Equal(t, http.StatusOK, status, string(raw))
	var restored struct {
		NRestored int `json:"n_restored"`
		NRead     int `json:"n_read"`
	}
	require.NoError(t, json.Unmarshal(raw, &restored))
	assert.Equal(t, 16, restored.NRestored)
	assert.Equal(t, saved.NWritten, restored.NRead)
	assert.Equal(t, 16, slotsOf(t, dst.url)[1].NPrompt, "the restored prompt is the slot's")

	delete(body, "id_slot")
	r := complete(t, dst.url, body)
	assert.Equal(t, 1, r.IDSlot, "the prompt goes to the slot that holds its prefix")
	assert.Equal(t, 16, r.TokensCached, "found in the restored blocks")
	assert.Equal(t, want.Tokens, r.Tokens, "restored KV gives the uncached tokens")

	status, raw = post(t, dst.url+"/slots/1?action=erase", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.JSONEq(t, `{"id_slot":1,"n_erased":18}`, string(raw))
}

func TestSlotActionsRefuseWhatLlamaServerRefuses(t *testing.T) {
	tm := loadTestModel(t)
	ts := slotServer(t, tm, 1, t.TempDir())
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/slots/0?action=save", map[string]any{"filename": "../escape"}, http.StatusBadRequest},
		{"/slots/0?action=save", map[string]any{"filename": "a/b"}, http.StatusBadRequest},
		{"/slots/0?action=restore", map[string]any{"filename": "missing.bin"}, http.StatusBadRequest},
		{"/slots/0?action=bogus", nil, http.StatusBadRequest},
		{"/slots/7?action=erase", nil, http.StatusBadRequest},
		{"/slots/x?action=erase", nil, http.StatusBadRequest},
	} {
		status, raw := post(t, ts.url+tc.path, tc.body)
		assert.Equal(t, tc.want, status, "%s %v: %s", tc.path, tc.body, raw)
	}
	plain := startServer(t, tm, engineConfig(false), Options{})
	status, raw := post(t, plain.url+"/slots/0?action=save", map[string]any{"filename": "x"})
	assert.Equal(t, http.StatusNotImplemented, status, "no --slot-save-path: %s", raw)
}

func TestValidFilenameIsLlamaCppsRule(t *testing.T) {
	for name, want := range map[string]bool{
		"slot0.bin": true, "日本.bin": true, "a b": true,
		"": false, ".": false, "..": false, "a..b": false, "a/b": false, `a\b`: false, "a:b": false,
		" a": false, "a ": false, "a.": false, "a\x01": false, "a\u2215b": false, "\xff": false,
		string(make([]byte, 256)): false,
	} {
		assert.Equal(t, want, validFilename(name), "%q", name)
	}
}
