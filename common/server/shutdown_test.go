package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvevents"
)

// TestRequestsAfterTheLoopStoppedAreRefused stops the engine loop of a
// server whose HTTP side still listens, as in the moment of a shutdown
// between the two, and sends what must then be answered at once: a slot
// restore (which waits for the loop through engine.Server.Do) and a
// completion are each a 503 shutting_down, within a bound that only tells
// an answer from a hang.
func TestRequestsAfterTheLoopStoppedAreRefused(t *testing.T) {
	tm := loadTestModel(t)
	e, err := engine.New(tm.m, engineConfig(true))
	require.NoError(t, err)
	t.Cleanup(e.Close)
	es := engine.NewServer(e)
	p := e.Pool()
	kv := &CacheFile{
		Identity: CacheIdentity{Model: "test-model", BlockSize: p.BlockSize(), Layers: p.Layers(), KVDim: p.KVDim(), DType: "float32"},
		Pool:     p, Observer: p.Observe(kvevents.DefaultHashSeed), Seed: kvevents.DefaultHashSeed,
	}
	hs := httptest.NewServer(New(es, Options{Tokenizer: tm.tok, PrefixCaching: true, Slots: 1, SlotSavePath: t.TempDir(), SlotKV: kv}))
	t.Cleanup(func() {
		if t.Failed() { // a handler may hang on the stopped loop: Close would wait for it
			hs.CloseClientConnections()
			return
		}
		hs.Close()
	})
	url := hs.URL
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { es.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	client := &http.Client{Timeout: 10 * time.Second}
	send := func(path string, body any) (int, []byte) {
		t.Helper()
		buf, err := json.Marshal(body)
		require.NoError(t, err)
		resp, err := client.Post(url+path, "application/json", bytes.NewReader(buf))
		require.NoError(t, err, "POST %s: no answer (a request waiting on a stopped loop hangs)", path)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, out
	}
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2, 1, 10, 11, 12}
	status, out := send("/completion", map[string]any{"prompt": prompt, "n_predict": 2, "ignore_eos": true, "id_slot": 0})
	require.Equal(t, http.StatusOK, status, string(out))
	status, out = send("/slots/0?action=save", map[string]any{"filename": "s.bin"})
	require.Equal(t, http.StatusOK, status, string(out))

	cancel()
	<-done
	for _, r := range []struct {
		path string
		body any
	}{
		{"/slots/0?action=restore", map[string]any{"filename": "s.bin"}},
		{"/completion", map[string]any{"prompt": prompt, "n_predict": 2}},
		{"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2}},
	} {
		status, out := send(r.path, r.body)
		require.Equal(t, http.StatusServiceUnavailable, status, "%s: %s", r.path, out)
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(out, &e), string(out))
		require.Equal(t, "shutting_down", e.Error.Code, "%s: %s", r.path, out)
	}
}
