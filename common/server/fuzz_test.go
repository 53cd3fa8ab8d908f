package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzPromptBody feeds any bytes as the body of /v1/completions,
// /completion and /tokenize to what their handlers decode it with
// (decodeBody, then the prompt or content reader): none may panic, a
// refusal is a 400 or a 413, and an accepted prompt has no more tokens
// than the body has bytes, so no body costs more than its size. The seed
// corpus (testdata/fuzz/FuzzPromptBody) holds every shape the APIs take
// and the 10,000-deep nesting that once cost seconds.
func FuzzPromptBody(f *testing.F) {
	tm := loadTestModel(f)
	h := &Handler{opts: Options{Tokenizer: tm.tok}}
	decode := func(body []byte, v any) *apiError {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		return decodeBody(httptest.NewRecorder(), r, 1<<20, v)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(endpoint string, tokens int, e *apiError) {
			t.Helper()
			switch {
			case e != nil && e.Status != http.StatusBadRequest && e.Status != http.StatusRequestEntityTooLarge:
				t.Fatalf("%s: status %d (%s); want 400 or 413", endpoint, e.Status, e.Message)
			case e != nil && e.Message == "":
				t.Fatalf("%s: a %d without a message", endpoint, e.Status)
			case e == nil && tokens > len(body):
				t.Fatalf("%s: %d tokens from a body of %d bytes", endpoint, tokens, len(body))
			}
		}

		var c completionRequest
		e := decode(body, &c)
		var ids []int32
		if e == nil {
			ids, e = h.completionPrompt(c.Prompt)
		}
		check("/v1/completions", len(ids), e)

		var l llamaRequest
		e = decode(body, &l)
		var prompts [][]int32
		if e == nil {
			prompts, e = h.prompts(l.Prompt)
		}
		n := 0
		for _, p := range prompts {
			n += len(p)
		}
		check("/completion", n, e)

		var q tokenizeRequest
		e = decode(body, &q)
		ids = nil
		if e == nil {
			ids, e = h.tokenizeContent(q.Content, q.AddSpecial)
		}
		check("/tokenize", len(ids), e)
	})
}
