package server

import (
	"html/template"
	"net/http"
)

// The home page is what a browser finds at GET /: llama-server serves its
// chat web UI there, and clients (its own test suite among them) expect a
// page, not a 404. This server has no chat UI; its page says what runs
// here and how the prefix cache is doing, read from the engine's snapshot
// when the page is asked for. With Options.NoUI (llama-server's --no-ui)
// GET / is a 404, as there.

// homeData is what the page shows.
type homeData struct {
	Model         string
	Context       int
	Slots         int
	PrefixCaching bool
	Finished      int
	Running       int
	Waiting       int
	Queried       int // prompt tokens looked up in the prefix cache
	Cached        int // of them, found cached
	HitPercent    float64
	Blocks        int // KV blocks in the pool
	CacheBlocks   int // of them, held by the prefix cache
	Evicted       int
}

var homePage = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Model}} · kvlab serve</title>
<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;line-height:1.4}td{padding:0 1em 0 0}code{background:#eee}</style>
</head>
<body>
<h1>{{.Model}}</h1>
<p>kvlab's <code>serve</code>: an inference server with a paged KV cache{{if .PrefixCaching}} and a prefix cache{{end}},
answering OpenAI's and llama-server's APIs. This page has no chat; send requests to the endpoints below.</p>
<table>
<tr><td>context</td><td>{{.Context}} tokens</td></tr>
<tr><td>slots</td><td>{{.Slots}}</td></tr>
<tr><td>requests</td><td>{{.Finished}} finished, {{.Running}} running, {{.Waiting}} waiting</td></tr>
<tr><td>prefix cache</td><td>{{if .PrefixCaching}}{{.Cached}} of {{.Queried}} prompt tokens found cached ({{printf "%.1f" .HitPercent}} %);
{{.CacheBlocks}} of {{.Blocks}} KV blocks cached, {{.Evicted}} evicted{{else}}off (start with --prefix-caching){{end}}</td></tr>
</table>
<h2>Endpoints</h2>
<ul>
<li><code>POST /v1/chat/completions</code>, <code>POST /v1/completions</code>: OpenAI's API</li>
<li><code>POST /completion</code>, <code>/tokenize</code>, <code>/detokenize</code>, <code>/apply-template</code>, <code>GET /slots</code>, <code>GET /props</code>: llama-server's</li>
<li><code>GET /v1/models</code>, <code>GET /health</code>, <code>GET /metrics</code> (Prometheus)</li>
</ul>
</body>
</html>
`))

// home serves GET /.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	if h.opts.NoUI {
		writeError(w, errNotFound("no route %s %s: the home page is off (--no-ui)", r.Method, r.URL.Path))
		return
	}
	s := h.es.Snapshot()
	d := homeData{
		Model: h.opts.ModelName, Context: h.es.ContextLimit(), Slots: len(h.slots.slots), PrefixCaching: h.opts.PrefixCaching,
		Finished: s.Stats.Finished, Running: s.Running, Waiting: s.Waiting,
		Queried: s.Stats.QueriedTokens, Cached: s.Stats.CachedTokens,
		Blocks: s.TotalBlocks, CacheBlocks: s.CacheBlocks, Evicted: s.Evicted,
	}
	if d.Queried > 0 {
		d.HitPercent = 100 * float64(d.Cached) / float64(d.Queried)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = homePage.Execute(w, d) // the data always fits the template: an error is a client gone
}
