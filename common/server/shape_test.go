package server

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The record this test holds the server to:
//
//   - testdata/llama_server_requests.json is the list of requests
//     llama-server's clients make (its endpoints, streams, slot actions,
//     errors), sent in order;
//   - testdata/llama_server_shapes.json is the key structure (keys and value
//     types, never values) of a real llama-server's answers to them,
//     recorded by scripts/record_llama_server_shapes.py against llama-server
//     built from llama.cpp's source and run on this project's built-in model
//     exported with `export-gguf` (the file's "source" says which commit,
//     the exact command lines and the date).
//
// The shape of a value is the script's TREE: an object maps each key to its
// shape, an array is [shape of its first element] or [], a scalar is
// "string", "number", "boolean" or "null".

// shapeRequest is one entry of the request list.
type shapeRequest struct {
	Name       string            `json:"name"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Body       json.RawMessage   `json:"body"`
	RawBody    *string           `json:"raw_body"`
	StatusOnly bool              `json:"status_only"`
	Headers    map[string]string `json:"headers"`
}

// shapeRecord is one answer as the script records it.
type shapeRecord struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        string `json:"body"` // json, sse, text, empty or skipped
	Shape       any    `json:"shape"`
	First       any    `json:"first"`
	Last        any    `json:"last"`
	Done        bool   `json:"done"`
}

// knownDifferences are the differences from llama-server this server makes
// on purpose, each a row of docs/serving.md's table "llama-server's API,
// endpoint by endpoint". A key is "request name: path" ("*" for every
// request) as shapeDiff writes paths; "status" for the status line.
var knownDifferences = map[string]string{
	// Malformed JSON is the client's mistake: 400, where llama-server says 500.
	"completion_malformed_json: status": "400 invalid_json, not 500",
	// OpenAI: usage only when stream_options.include_usage asks.
	"v1_completions_stream: last:usage": "usage only with include_usage",
	// A slot that does not exist is refused, where llama-server serves the
	// request in a slot of its choosing and erases nothing with a 200.
	"completion_unknown_slot: status": "400 for an id_slot that does not exist",
	"slot_unknown_id: status":         "400 for a slot that does not exist",
}

// TestLlamaServerShapes replays the recorded requests against this server
// on loopback and fails on a key llama-server returns that this server
// leaves out, or a different status, unless knownDifferences lists it.
// Extra keys are allowed (clients ignore what they do not know); value
// types are logged, not checked (llama-server's error code is a number,
// OpenAI's a string).
func TestLlamaServerShapes(t *testing.T) {
	var reqs struct {
		Requests []shapeRequest `json:"requests"`
	}
	readJSON(t, "testdata/llama_server_requests.json", &reqs)
	var rec struct {
		Responses map[string]shapeRecord `json:"responses"`
	}
	readJSON(t, "testdata/llama_server_shapes.json", &rec)
	require.NotEmpty(t, reqs.Requests)

	tm := loadTestModel(t)
	// llama-server ran with -np 2, and the model's whole context: a
	// request with tools has them described in its prompt, longer than
	// the tests' usual context.
	cfg := engineConfig(true)
	cfg.MaxContext, cfg.NumBlocks = 1024, 1024
	ts := slotServerConfig(t, tm, cfg, 2, t.TempDir())
	used := map[string]bool{}
	for _, q := range reqs.Requests {
		want, ok := rec.Responses[q.Name]
		require.True(t, ok, "request %s has no recorded answer", q.Name)
		have := recordAnswer(t, ts.url, q)
		for _, d := range compareShapes(q.Name, want, have) {
			if reason, ok := knownDifferences[d.key]; ok {
				used[d.key] = true
				t.Logf("%s: known difference (%s)", d.text, reason)
				continue
			}
			if d.soft {
				t.Logf("%s", d.text)
				continue
			}
			t.Errorf("%s", d.text)
		}
	}
	for k := range knownDifferences {
		if !used[k] {
			t.Errorf("knownDifferences lists %q, which no longer differs: remove it here and from docs/serving.md", k)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}

// recordAnswer sends q and records the answer as the script does.
func recordAnswer(t *testing.T, base string, q shapeRequest) shapeRecord {
	t.Helper()
	var body io.Reader
	switch {
	case q.RawBody != nil:
		body = strings.NewReader(*q.RawBody)
	case len(q.Body) > 0:
		body = bytes.NewReader(q.Body)
	}
	req, err := http.NewRequest(q.Method, base+q.Path, body)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range q.Headers {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	require.NoError(t, err, q.Name)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err, q.Name)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	r := shapeRecord{Status: resp.StatusCode, ContentType: strings.ToLower(ct)}
	switch {
	case q.StatusOnly:
		r.Body = "skipped"
	case r.ContentType == "text/event-stream":
		r.Body = "sse"
		var payload []string
		evs := events(t, bytes.NewReader(data))
		for _, e := range evs {
			if strings.TrimSpace(e) != "[DONE]" {
				payload = append(payload, e)
			}
		}
		r.Done = len(evs) > 0 && strings.TrimSpace(evs[len(evs)-1]) == "[DONE]"
		if len(payload) > 0 {
			r.First, r.Last = eventShape(payload[0]), eventShape(payload[len(payload)-1])
		}
	case len(data) == 0:
		r.Body = "empty"
	default:
		var v any
		if json.Unmarshal(data, &v) != nil {
			r.Body = "text"
			break
		}
		r.Body, r.Shape = "json", shapeOf(v)
	}
	return r
}

func eventShape(data string) any {
	var v any
	if json.Unmarshal([]byte(data), &v) != nil {
		return "text"
	}
	return shapeOf(v)
}

// shapeOf is the script's TREE of a decoded JSON value.
func shapeOf(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = shapeOf(e)
		}
		return out
	case []any:
		if len(v) == 0 {
			return []any{}
		}
		return []any{shapeOf(v[0])}
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case nil:
		return "null"
	}
	panic("not a decoded JSON value")
}

// shapeDiff is one difference: key names it in knownDifferences, soft ones
// are only logged.
type shapeDiff struct {
	key, text string
	soft      bool
}

func compareShapes(name string, want, have shapeRecord) []shapeDiff {
	var out []shapeDiff
	add := func(path, text string, soft bool) {
		out = append(out, shapeDiff{key: name + ": " + path, text: name + ": " + text, soft: soft})
	}
	if want.Status != have.Status {
		add("status", "status: llama-server "+itoa(want.Status)+", here "+itoa(have.Status), false)
		return out // a different status is a different body
	}
	if want.Body != have.Body {
		add("body", "body: llama-server "+want.Body+", here "+have.Body, false)
		return out
	}
	if want.Body == "sse" && want.Done != have.Done {
		add("done", "stream: llama-server ends with [DONE] "+boolText(want.Done)+", here "+boolText(have.Done), false)
	}
	walk := func(prefix string, a, b any) {
		missingKeys(a, b, "", func(path, why string, soft bool) {
			add(prefix+path, prefix+path+": "+why, soft)
		})
	}
	switch want.Body {
	case "json":
		walk("", want.Shape, have.Shape)
	case "sse":
		walk("first:", want.First, have.First)
		walk("last:", want.Last, have.Last)
	}
	return out
}

// missingKeys calls report for every key of a (llama-server's) that b
// lacks (hard), and every type that differs (soft).
func missingKeys(a, b any, path string, report func(path, why string, soft bool)) {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			report(path, "an object there, "+kindOf(b)+" here", false)
			return
		}
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if _, ok := bm[k]; !ok {
				report(p, "llama-server has this key, this server does not", false)
				continue
			}
			missingKeys(a[k], bm[k], p, report)
		}
	case []any:
		bl, ok := b.([]any)
		if !ok {
			report(path, "an array there, "+kindOf(b)+" here", false)
			return
		}
		if len(a) == 1 && len(bl) == 1 {
			missingKeys(a[0], bl[0], path+"[]", report)
		}
	default:
		if kindOf(a) != kindOf(b) && a != "null" && b != "null" {
			report(path, kindOf(a)+" there, "+kindOf(b)+" here", true)
		}
	}
}

func kindOf(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return v
	}
	return "nothing"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func boolText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
