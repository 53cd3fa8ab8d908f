package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/grammar"
)

// yesNoNumber is a small grammar and, written apart from it, the same
// language as a regular expression: the independent check of each answer.
const yesNoNumber = `root ::= "yes" | "no" | [0-9]{1,3}`

var yesNoNumberRE = regexp.MustCompile(`^(yes|no|[0-9]{1,3})$`)

// jsonish is a small JSON object grammar; encoding/json checks each
// answer, and its shape, independently.
const jsonish = `root ::= "{" ws "\"n\"" ws ":" ws num ws "," ws "\"ok\"" ws ":" ws bool ws "}"
num ::= "-"? ([0-9] | [1-9] [0-9]{1,3})
bool ::= "true" | "false"
ws ::= [ ]?`

// choice is one sample's text and finish reason, however the endpoint
// wrote it.
type choice struct {
	text, finish string
}

// generateText posts body to path (streamed or not) and returns each
// sample's text, by index.
func generateText(t *testing.T, url, path string, body map[string]any) []choice {
	t.Helper()
	streamed, _ := body["stream"].(bool)
	var objs []map[string]any
	if streamed {
		for _, ev := range stream(t, url+path, body) {
			if ev == "[DONE]" {
				continue
			}
			var o map[string]any
			require.NoError(t, json.Unmarshal([]byte(ev), &o), ev)
			objs = append(objs, o)
		}
	} else {
		status, raw := post(t, url+path, body)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var o map[string]any
		require.NoError(t, json.Unmarshal(raw, &o))
		objs = append(objs, o)
	}
	var out []choice
	at := func(i int) *choice {
		for len(out) <= i {
			out = append(out, choice{})
		}
		return &out[i]
	}
	for _, o := range objs {
		if path == "/completion" {
			c := at(0)
			c.text += o["content"].(string)
			if st, _ := o["stop_type"].(string); st != "" {
				c.finish = st
			}
			continue
		}
		choices, _ := o["choices"].([]any)
		for _, x := range choices {
			ch := x.(map[string]any)
			c := at(int(ch["index"].(float64)))
			switch {
			case ch["text"] != nil:
				c.text += ch["text"].(string)
			case ch["message"] != nil:
				c.text += ch["message"].(map[string]any)["content"].(string)
			case ch["delta"] != nil:
				if s, ok := ch["delta"].(map[string]any)["content"].(string); ok {
					c.text += s
				}
			}
			if f, ok := ch["finish_reason"].(string); ok {
				c.finish = f
			}
		}
	}
	return out
}

// generationBody is path's body asking for a sampled answer.
func generationBody(path string, seed, n int, streamed bool) map[string]any {
	b := map[string]any{"temperature": 1.5, "seed": seed, "max_tokens": 12, "stream": streamed}
	switch path {
	case "/v1/chat/completions":
		b["messages"] = []map[string]any{{"role": "user", "content": "answer"}}
	default:
		b["prompt"] = "answer:"
	}
	if n > 1 {
		b["n"] = n
	}
	return b
}

// inLanguage reports whether the grammar accepts text as a whole sentence.
func inLanguage(t *testing.T, src, text string) bool {
	t.Helper()
	g, err := grammar.Parse(src)
	require.NoError(t, err)
	m := g.NewMatcher()
	return m.Accept([]byte(text)) && m.CanEnd()
}

// TestGrammarConstrainsEveryEndpoint: for many seeds, on /completion,
// /v1/completions and /v1/chat/completions, plain, streamed and with n=2,
// every answer of the random model is a sentence of the grammar (checked
// by the grammar's matcher and by a regexp or encoding/json), ending
// because the grammar allowed the end.
func TestGrammarConstrainsEveryEndpoint(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{})
	seen := map[string]bool{}
	for _, path := range []string{"/completion", "/v1/completions", "/v1/chat/completions"} {
		for seed := range 32 {
			for _, mode := range []struct {
				n        int
				streamed bool
			}{{1, false}, {1, true}, {2, false}, {2, true}} {
				if path == "/completion" && mode.n > 1 {
					continue // llama-server's /completion has no n
				}
				name := fmt.Sprintf("%s seed %d n %d stream %v", path, seed, mode.n, mode.streamed)
				body := generationBody(path, seed, mode.n, mode.streamed)
				body["grammar"] = yesNoNumber
				got := generateText(t, ts.url, path, body)
				require.Len(t, got, mode.n, name)
				for _, c := range got {
					require.Regexp(t, yesNoNumberRE, c.text, name)
					require.True(t, inLanguage(t, yesNoNumber, c.text), "%s: %q", name, c.text)
					require.Contains(t, []string{"stop", "eos"}, c.finish, "%s: %q", name, c.text)
					seen[c.text] = true
				}
			}
		}
	}
	assert.Greater(t, len(seen), 10, "the random model's answers vary: %v", seen)

	for seed := range 30 {
		body := generationBody("/v1/completions", seed, 2, seed%2 == 0)
		body["grammar"], body["max_tokens"] = jsonish, 64
		for _, c := range generateText(t, ts.url, "/v1/completions", body) {
			var v struct {
				N  *int  `json:"n"`
				OK *bool `json:"ok"`
			}
			dec := json.NewDecoder(strings.NewReader(c.text))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&v), "seed %d: %q", seed, c.text)
			require.NotNil(t, v.N, c.text)
			require.NotNil(t, v.OK, c.text)
			require.True(t, inLanguage(t, jsonish, c.text), c.text)
			require.Equal(t, "stop", c.finish, c.text)
		}
	}
}

// TestBadGrammarIsA400: a grammar that does not parse is refused before
// anything runs, with the field and the line and column, on every
// endpoint.
func TestBadGrammarIsA400(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, path := range []string{"/completion", "/v1/completions", "/v1/chat/completions"} {
		for src, where := range map[string]string{
			"root ::= (":              "line 1, column",
			"root ::= \"a\"\nx ::= [": "line 2, column",
			`other ::= "a"`:           "root",
		} {
			body := generationBody(path, 1, 1, false)
			body["grammar"] = src
			status, raw := post(t, ts.url+path, body)
			require.Equal(t, http.StatusBadRequest, status, "%s %q: %s", path, src, raw)
			var e struct{ Error apiError }
			require.NoError(t, json.Unmarshal(raw, &e))
			assert.Equal(t, "grammar", e.Error.Param, path)
			assert.Contains(t, e.Error.Message, where, "%s %q", path, src)
		}
	}
}
