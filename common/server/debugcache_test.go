package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/phase08_prefix/radix"
)

// recordedCache is the radix tree with a Describe of its own: a trie of
// the whole blocks the engine offered it, one node per block, kept in the
// order they came (parents first). It never forgets a block, so it is a
// fair picture only while nothing is evicted: enough to test what the
// server does with a view, apart from any design's Describe.
type recordedCache struct {
	kvcache.PrefixCache
	bs    int
	ids   map[string]int
	nodes []kvcache.ViewNode
}

func recordedRadix(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
	return &recordedCache{PrefixCache: radix.New(a, bs), bs: bs, ids: map[string]int{}}
}

func (c *recordedCache) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	key := func(n int) string { return salt + "|" + fmt.Sprint(tokens[:n]) }
	for b := 0; (b+1)*c.bs <= len(tokens) && b < len(pages); b++ {
		if _, ok := c.ids[key((b+1)*c.bs)]; ok {
			continue
		}
		parent := -1
		if b > 0 {
			parent = c.ids[key(b*c.bs)]
		}
		id := len(c.nodes)
		c.ids[key((b+1)*c.bs)] = id
		c.nodes = append(c.nodes, kvcache.ViewNode{ID: id, Parent: parent, Salt: salt, Tokens: slices.Clone(tokens[b*c.bs : (b+1)*c.bs]),
			Blocks: []int32{pages[b]}, Refs: []int{1}, EvictRank: -1})
	}
	return c.PrefixCache.Insert(seq, salt, tokens, pages, lent)
}

func (c *recordedCache) Describe(max int) kvcache.View {
	v := kvcache.View{Design: "recorded", BlockSize: c.bs, Nodes: slices.Clone(c.nodes)}
	if max > 0 && len(v.Nodes) > max {
		v.Truncated, v.Nodes = len(v.Nodes)-max, v.Nodes[:max]
	}
	return v
}

// opaqueCache is a prefix cache that cannot describe itself.
type opaqueCache struct{ kvcache.PrefixCache }

// debugJSON is what a client reads of /debug/cache.json.
type debugJSON struct {
	Seq  uint64       `json:"seq"`
	View kvcache.View `json:"view"`
	Pool struct {
		Total, Free, Cached, Evicted, Live int
	} `json:"pool"`
	Tiers  []map[string]any `json:"tiers"`
	Misses map[string]int   `json:"misses"`
	Hits   struct {
		Queried, Cached int
	} `json:"hits"`
}

// startDebugServer serves a fresh engine with cache and DebugCache d.
func startDebugServer(t *testing.T, cache func(*kvcache.Allocator, int) kvcache.PrefixCache, d *DebugCache, opts Options) *testServer {
	t.Helper()
	cfg := engineConfig(true)
	cfg.PrefixCache = cache
	opts.DebugCache = d
	return startServer(t, loadTestModel(t), cfg, opts)
}

func getDebugJSON(t *testing.T, url string) debugJSON {
	t.Helper()
	resp, err := testClient.Get(url + "/debug/cache.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var doc debugJSON
	require.NoError(t, json.Unmarshal(body, &doc), string(body))
	return doc
}

func debugComplete(t *testing.T, url string, p []int32, salt string) {
	t.Helper()
	status, body := post(t, url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 2, "temperature": 0, "cache_salt": salt})
	require.Equal(t, http.StatusOK, status, string(body))
}

// viewStream reads the `event: view` events of a /debug/cache/events
// response into a channel, closed when the stream ends.
func viewStream(t *testing.T, r io.Reader) <-chan debugJSON {
	ch := make(chan debugJSON, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var doc debugJSON
				if event != "view" || json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &doc) != nil {
					t.Errorf("bad event %q: %.200s", event, line)
					return
				}
				ch <- doc
			}
		}
	}()
	return ch
}

// openViews subscribes to /debug/cache/events; cancel ends the stream.
func openViews(t *testing.T, ctx context.Context, url string) <-chan debugJSON {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/debug/cache/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	t.Cleanup(func() { resp.Body.Close() })
	return viewStream(t, resp.Body)
}

// nextView waits for a view on ch that satisfies ok.
func nextView(t *testing.T, ch <-chan debugJSON, what string, ok func(debugJSON) bool) debugJSON {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case doc, open := <-ch:
			require.True(t, open, "the stream ended waiting for %s", what)
			if ok(doc) {
				return doc
			}
		case <-timeout:
			t.Fatalf("no view with %s within 10 s", what)
		}
	}
}

// TestDebugCacheOffIs404: without Options.DebugCache the routes are
// unknown paths.
func TestDebugCacheOffIs404(t *testing.T) {
	ts := startServer(t, loadTestModel(t), engineConfig(true), Options{})
	for _, p := range []string{"/debug/cache", "/debug/cache.json", "/debug/cache/events"} {
		resp, err := testClient.Get(ts.url + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, p)
	}
}

// TestDebugCacheWithoutDescribeIs501: a design that implements no
// kvcache.Describer is a 501 naming it, on the JSON and on the stream.
func TestDebugCacheWithoutDescribeIs501(t *testing.T) {
	ts := startDebugServer(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return opaqueCache{radix.New(a, bs)} }, &DebugCache{}, Options{})
	for _, p := range []string{"/debug/cache.json", "/debug/cache/events"} {
		status, body := get(t, ts.url+p)
		assert.Equal(t, http.StatusNotImplemented, status, p)
		assert.Contains(t, body, "server.opaqueCache", "%s names the design", p)
	}
	status, _ := get(t, ts.url+"/debug/cache") // the page itself loads and shows the error
	assert.Equal(t, http.StatusOK, status)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := testClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestDebugCachePageIsSelfContained: the page loads nothing from anywhere
// (no URL with a scheme, no src or href at all, no CSS url()), and its
// Content-Security-Policy lets it load nothing but this server and run
// nothing but its own inline style and script, which the hashes name.
func TestDebugCachePageIsSelfContained(t *testing.T) {
	ts := startDebugServer(t, recordedRadix, &DebugCache{}, Options{})
	resp, err := testClient.Get(ts.url + "/debug/cache")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := string(body)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	for _, bad := range []string{"http://", "https://", "src=", "href=", "url(", "@import", "//cdn"} {
		assert.NotContains(t, strings.ToLower(page), bad)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	assert.True(t, strings.HasPrefix(csp, "default-src 'self';"), csp)
	assert.NotContains(t, csp, "unsafe")
	assert.NotContains(t, csp, "*")
	for tag, dir := range map[string]string{"style": "style-src", "script": "script-src"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
		require.Len(t, m, 1, "one %s block", tag)
		sum := sha256.Sum256([]byte(m[0][1]))
		assert.Contains(t, csp, dir+" 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	assert.Contains(t, page, "data-nodes")
	assert.Contains(t, page, `new EventSource("/debug/cache/events")`)
	assert.Contains(t, page, `fetch("/debug/cache.json")`)
}

// TestDebugCacheJSONShowsTheCache: after two prompts that share their
// first blocks, the view holds each block once, the shared ones with one
// child and the last shared one with two; a salted prompt is a root of
// its own; the pool's counts are the engine's; seq moves only when the
// document does; the node cap is kept and the rest counted.
func TestDebugCacheJSONShowsTheCache(t *testing.T) {
	d := &DebugCache{}
	ts := startDebugServer(t, recordedRadix, d, Options{})
	empty := getDebugJSON(t, ts.url)
	assert.Empty(t, empty.View.Nodes)
	assert.Equal(t, "recorded", empty.View.Design)
	assert.Equal(t, getDebugJSON(t, ts.url).Seq, empty.Seq, "nothing changed")

	shared := prompt(16, 1)
	a := append(slices.Clone(shared), prompt(8, 2)...)
	b := append(slices.Clone(shared), prompt(8, 3)...)
	debugComplete(t, ts.url, a, "")
	debugComplete(t, ts.url, b, "")
	doc := getDebugJSON(t, ts.url)
	assert.Greater(t, doc.Seq, empty.Seq)
	children := map[int]int{}
	for _, n := range doc.View.Nodes {
		children[n.Parent]++
	}
	assert.Equal(t, 1, children[-1], "one root")
	assert.Equal(t, 2, children[3], "the fourth block, the last shared, has two children")
	assert.Len(t, doc.View.Nodes, 4+2*2, "the shared blocks once, each tail's two")
	snap := ts.es.Snapshot()
	assert.Equal(t, snap.TotalBlocks, doc.Pool.Total)
	assert.Equal(t, snap.FreeBlocks, doc.Pool.Free)
	assert.Equal(t, snap.CacheBlocks, doc.Pool.Cached)
	assert.Equal(t, snap.Stats.QueriedTokens, doc.Hits.Queried)
	assert.Equal(t, snap.Stats.CachedTokens, doc.Hits.Cached)
	assert.Equal(t, 16, doc.Hits.Cached, "b found the shared blocks")
	assert.Equal(t, snap.Stats.Misses.Cold, doc.Misses["cold"])
	assert.Len(t, doc.Misses, 5)
	assert.Equal(t, []map[string]any{}, doc.Tiers)

	debugComplete(t, ts.url, a, "tenant")
	doc = getDebugJSON(t, ts.url)
	var roots []string
	for _, n := range doc.View.Nodes {
		if n.Parent < 0 {
			roots = append(roots, n.Salt)
		}
	}
	assert.ElementsMatch(t, []string{"", "tenant"}, roots)

}

// TestDebugCacheKeepsTheNodeCap: a view carries at most MaxNodes nodes,
// parents first, and counts the rest.
func TestDebugCacheKeepsTheNodeCap(t *testing.T) {
	ts := startDebugServer(t, recordedRadix, &DebugCache{MaxNodes: 3}, Options{})
	debugComplete(t, ts.url, prompt(40, 9), "")
	doc := getDebugJSON(t, ts.url)
	require.Len(t, doc.View.Nodes, 3)
	assert.Equal(t, 10-3, doc.View.Truncated)
	assert.Equal(t, -1, doc.View.Nodes[0].Parent)
}

// TestDebugCacheEventsFollowTheCache: a stream's first view is the
// current one, and a request brings a new one with more nodes; several
// streams share the hub's views, so the views taken on the engine's loop
// do not grow with the number of streams.
func TestDebugCacheEventsFollowTheCache(t *testing.T) {
	d := &DebugCache{Interval: 50 * time.Millisecond}
	ts := startDebugServer(t, recordedRadix, d, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := openViews(t, ctx, ts.url)
	v0 := nextView(t, first, "the first view", func(debugJSON) bool { return true })
	assert.Empty(t, v0.View.Nodes)
	const streams = 8
	all := []<-chan debugJSON{first}
	for range streams - 1 {
		all = append(all, openViews(t, ctx, ts.url))
	}
	for _, ch := range all[1:] {
		nextView(t, ch, "the first view", func(debugJSON) bool { return true })
	}
	before, start := d.views.Load(), time.Now()
	for i := range 3 {
		debugComplete(t, ts.url, prompt(20, int32(10+i)), "")
		for _, ch := range all {
			nextView(t, ch, fmt.Sprintf("%d prompts' nodes", i+1), func(v debugJSON) bool { return len(v.View.Nodes) == 5*(i+1) })
		}
	}
	taken := d.views.Load() - before
	ticks := int64(time.Since(start)/d.Interval) + 2
	assert.LessOrEqual(t, taken, ticks, "one view per tick at most, whatever the number of streams")
	t.Logf("%d views taken for %d streams over %d ticks", taken, streams, ticks)
}

// TestDebugCacheStreamCap: one stream past MaxSubscribers is a 503; a
// closed stream frees its place.
func TestDebugCacheStreamCap(t *testing.T) {
	d := &DebugCache{MaxSubscribers: 2}
	ts := startDebugServer(t, recordedRadix, d, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	openViews(t, ctx, ts.url)
	openViews(t, ctx, ts.url)
	status, body := get(t, ts.url+"/debug/cache/events")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, "too many")
	cancel()
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.hub.subs) == 0
	}, 10*time.Second, 10*time.Millisecond)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	openViews(t, ctx2, ts.url)
}

// TestDebugCacheStuckStreamDelaysNoOne: a client that opens the stream
// and never reads, with small kernel buffers both sides, cannot take a
// view of several hundred nodes. Meanwhile completions are served within
// a bound, another stream keeps getting each new view, and once a write
// to the stuck one passes the WriteTimeout its stream ends.
func TestDebugCacheStuckStreamDelaysNoOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), slowGuard)
	defer cancel()
	d := &DebugCache{Interval: 50 * time.Millisecond}
	cfg := engineConfig(true)
	cfg.PrefixCache = recordedRadix
	cfg.NumBlocks = 2048
	ts := startServerWith(t, loadTestModel(t), cfg, engine.Limits{}, Options{DebugCache: d, WriteTimeout: 300 * time.Millisecond}, func(l net.Listener) net.Listener { return smallSendListener{l} })
	for p := range 8 { // 8 prompts of 60 blocks: a view of about 50 KB
		debugComplete(t, ts.url, prompt(240, int32(100+p)), "")
	}
	dl := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return smallBuffer(syscall.SO_RCVBUF)(rc) }}
	stuck, err := dl.DialContext(ctx, "tcp", strings.TrimPrefix(ts.url, "http://"))
	require.NoError(t, err)
	defer stuck.Close()
	_, err = fmt.Fprintf(stuck, "GET /debug/cache/events HTTP/1.1\r\nHost: kvlab\r\n\r\n")
	require.NoError(t, err)
	healthy := openViews(t, ctx, ts.url)
	nextView(t, healthy, "the first view", func(debugJSON) bool { return true })

	for i := range 6 {
		start := time.Now()
		debugComplete(t, ts.url, prompt(40, int32(200+i)), "")
		assert.Less(t, time.Since(start), 5*time.Second, "a completion waits on the stuck stream")
		want := 8*60 + 10*(i+1)
		nextView(t, healthy, fmt.Sprintf("%d nodes", want), func(v debugJSON) bool { return len(v.View.Nodes) == want })
	}
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.hub.subs) == 1
	}, 10*time.Second, 20*time.Millisecond, "the stuck stream ends after its write times out")
}

// TestDebugCacheCloseEndsStreams: Close ends open streams (serve calls it
// on shutdown) and refuses new ones.
func TestDebugCacheCloseEndsStreams(t *testing.T) {
	d := &DebugCache{}
	ts := startDebugServer(t, recordedRadix, d, Options{})
	ch := openViews(t, context.Background(), ts.url)
	nextView(t, ch, "the first view", func(debugJSON) bool { return true })
	d.Close()
	select {
	case _, open := <-ch:
		for open {
			_, open = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open after Close")
	}
	status, _ := get(t, ts.url+"/debug/cache/events")
	assert.Equal(t, http.StatusServiceUnavailable, status)
}

// TestDebugCacheBusyLoopIs503: when the engine's loop does not take the
// view within Timeout, the JSON is a 503 at once (with Retry-After), not a
// request held for as long as the loop is busy; once the loop is free the
// view is served again.
func TestDebugCacheBusyLoopIs503(t *testing.T) {
	d := &DebugCache{Timeout: 100 * time.Millisecond}
	ts := startDebugServer(t, recordedRadix, d, Options{})
	release, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = ts.es.Do(func(*engine.Engine) error { close(held); <-release; return nil })
	}()
	<-held
	start := time.Now()
	resp, err := testClient.Get(ts.url + "/debug/cache.json")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Less(t, time.Since(start), 5*time.Second)
	close(release)
	getDebugJSON(t, ts.url)
}
