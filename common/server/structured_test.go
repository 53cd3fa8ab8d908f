package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/grammar"
	"kvlab/common/kvcache"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
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

// TestGrammarIsInTheSettings: /completion's generation_settings show the
// grammar the request ran under, as llama-server's do: the request's own,
// or the one converted from its schema.
func TestGrammarIsInTheSettings(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, extra := range []map[string]any{{"grammar": yesNoNumber}, {"json_schema": map[string]any{"type": "boolean"}}} {
		body := generationBody("/completion", 1, 1, false)
		maps.Copy(body, extra)
		status, raw := post(t, ts.url+"/completion", body)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var got struct {
			Settings struct {
				Grammar string `json:"grammar"`
			} `json:"generation_settings"`
			Content string `json:"content"`
		}
		require.NoError(t, json.Unmarshal(raw, &got))
		if _, ok := extra["grammar"]; ok {
			assert.Equal(t, yesNoNumber, got.Settings.Grammar)
		} else {
			assert.Contains(t, got.Settings.Grammar, "root ::=")
			assert.Contains(t, []string{"true", "false"}, strings.TrimSpace(got.Content))
		}
	}
}

// tooLarge is a grammar of a few hundred bytes whose repetitions would
// expand to over a million elements.
func tooLarge() string {
	src := "root ::= x0"
	for i := range 17 {
		src += fmt.Sprintf("\nx%d ::= [a]{65536}", i)
	}
	return src
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
			// Each count is fine; together they would expand to too much.
			tooLarge(): "line 18, column 12: grammar too large",
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

// person is the schema of TestJSONSchemaConstrainsEveryEndpoint; the test
// checks its rules itself, with encoding/json.
const person = `{"type": "object", "properties": {
	"name": {"type": "string", "maxLength": 6},
	"age": {"type": "integer", "minimum": 0, "maximum": 150},
	"tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}
}, "required": ["name", "age"], "additionalProperties": false}`

// checkPerson decodes text as person's schema says a document must be.
func checkPerson(t *testing.T, text, name string) {
	t.Helper()
	var v struct {
		Name *string  `json:"name"`
		Age  *float64 `json:"age"`
		Tags []string `json:"tags"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "%s: %q", name, text)
	require.False(t, dec.More(), "%s: %q", name, text)
	require.NotNil(t, v.Name, "%s: %q", name, text)
	require.NotNil(t, v.Age, "%s: %q", name, text)
	require.LessOrEqual(t, len([]rune(*v.Name)), 6, "%s: %q", name, text)
	require.Equal(t, math.Trunc(*v.Age), *v.Age, "%s: %q", name, text)
	require.True(t, *v.Age >= 0 && *v.Age <= 150, "%s: %q", name, text)
	require.LessOrEqual(t, len(v.Tags), 2, "%s: %q", name, text)
	for _, tag := range v.Tags {
		require.Contains(t, []string{"a", "b"}, tag, "%s: %q", name, text)
	}
}

// TestJSONSchemaConstrainsEveryEndpoint: json_schema on all three
// endpoints, and response_format's json_schema on the /v1 ones, give
// documents the schema accepts, over many seeds, streamed or not.
func TestJSONSchemaConstrainsEveryEndpoint(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{})
	var schema any
	require.NoError(t, json.Unmarshal([]byte(person), &schema))
	stopped := 0
	for _, path := range []string{"/completion", "/v1/completions", "/v1/chat/completions"} {
		for seed := range 30 {
			for _, viaFormat := range []bool{false, true} {
				if viaFormat && path == "/completion" {
					continue
				}
				name := fmt.Sprintf("%s seed %d response_format %v", path, seed, viaFormat)
				body := generationBody(path, seed, 1, seed%2 == 1)
				body["max_tokens"] = 120
				if viaFormat {
					body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": schema}}
				} else {
					body["json_schema"] = schema
				}
				c := generateText(t, ts.url, path, body)[0]
				if c.finish == "length" || c.finish == "limit" {
					continue // cut short: not a whole document
				}
				stopped++
				checkPerson(t, c.text, name)
			}
		}
	}
	assert.Greater(t, stopped, 100, "most answers end inside 120 tokens")
}

// TestResponseFormatJSONObject: {"type":"json_object"} gives a JSON
// object; {"type":"text"} leaves the output free.
func TestResponseFormatJSONObject(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	stopped := 0
	for seed := range 30 {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
			body := generationBody(path, seed, 1, false)
			body["max_tokens"], body["response_format"] = 150, map[string]any{"type": "json_object"}
			c := generateText(t, ts.url, path, body)[0]
			if c.finish != "stop" {
				continue
			}
			stopped++
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.text), &v), "%s seed %d: %q", path, seed, c.text)
		}
	}
	assert.Greater(t, stopped, 20)
	body := generationBody("/v1/chat/completions", 1, 1, false)
	body["response_format"] = map[string]any{"type": "text"}
	require.Len(t, generateText(t, ts.url, "/v1/chat/completions", body), 1)
}

// TestBadStructuredFieldsAre400s: an unsupported schema keyword is named
// with its JSON pointer; two ways of constraining at once, and an unknown
// response_format type, are refused naming the field.
func TestBadStructuredFieldsAre400s(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, c := range []struct {
		path   string
		fields map[string]any
		param  string
		want   string
	}{
		{"/completion", map[string]any{"json_schema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"not": map[string]any{}}}}}, "json_schema", `/properties/x/not: keyword "not"`},
		{"/v1/chat/completions", map[string]any{"json_schema": map[string]any{"type": "string", "if": map[string]any{}}}, "json_schema", `/if: keyword "if"`},
		{"/v1/chat/completions", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{"type": "string", "not": map[string]any{}}}}}, "response_format", `/not: keyword "not"`},
		{"/v1/completions", map[string]any{"grammar": yesNoNumber, "json_schema": map[string]any{"type": "string"}}, "json_schema", "not both"},
		{"/v1/chat/completions", map[string]any{"grammar": yesNoNumber, "response_format": map[string]any{"type": "json_object"}}, "response_format", "not both"},
		{"/v1/chat/completions", map[string]any{"response_format": map[string]any{"type": "xml"}}, "response_format", "xml"},
	} {
		body := generationBody(c.path, 1, 1, false)
		maps.Copy(body, c.fields)
		status, raw := post(t, ts.url+c.path, body)
		require.Equal(t, http.StatusBadRequest, status, "%s %v: %s", c.path, c.fields, raw)
		var e struct{ Error apiError }
		require.NoError(t, json.Unmarshal(raw, &e))
		assert.Equal(t, c.param, e.Error.Param, "%s %v", c.path, c.fields)
		assert.Contains(t, e.Error.Message, c.want, "%s %v", c.path, c.fields)
	}
}

// TestGrammarOnEveryCacheDesign: the prefix cache does not change what a
// constrained request generates (on each of the three designs its tokens
// are exactly those of a server without a cache), and constrained and
// free requests share cached prefixes both ways.
func TestGrammarOnEveryCacheDesign(t *testing.T) {
	tm := loadTestModel(t)
	const prompt = "Answer the question with yes, no or a number of at most three digits:"
	type answer struct {
		Tokens []int32 `json:"tokens"`
		Cached int     `json:"tokens_cached"`
	}
	ask := func(url string, seed int, gram string) answer {
		body := map[string]any{"prompt": prompt, "temperature": 1.2, "seed": seed, "n_predict": 40}
		if gram != "" {
			body["grammar"] = gram
		}
		status, raw := post(t, url+"/completion", body)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var a answer
		require.NoError(t, json.Unmarshal(raw, &a))
		return a
	}
	plain := startServer(t, tm, engineConfig(false), Options{})
	var want [][]int32
	for seed := range 12 {
		gram := []string{yesNoNumber, jsonish}[seed%2]
		a := ask(plain.url, seed, gram)
		require.Zero(t, a.Cached)
		want = append(want, a.Tokens)
	}
	for name, design := range map[string]func(*kvcache.Allocator, int) kvcache.PrefixCache{
		"radix": radix.PrefixCache, "blockhash": blockhash.PrefixCache, "trie": trie.PrefixCache,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := engineConfig(false)
			cfg.PrefixCache = design
			ts := startServer(t, tm, cfg, Options{})
			free := ask(ts.url, 100, "")
			assert.Zero(t, free.Cached)
			for seed := range 12 {
				gram := []string{yesNoNumber, jsonish}[seed%2]
				a := ask(ts.url, seed, gram)
				assert.Equal(t, want[seed], a.Tokens, "seed %d", seed)
				assert.Positive(t, a.Cached, "seed %d: a constrained request reuses the free one's prompt", seed)
			}
			ts2 := startServer(t, tm, cfg, Options{})
			ask(ts2.url, 1, jsonish)
			assert.Positive(t, ask(ts2.url, 100, "").Cached, "a free request reuses a constrained one's prompt")
		})
	}
}
