package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
)

// debugDoc is what a client reads of /debug/cache.json.
type debugDoc struct {
	Seq  uint64       `json:"seq"`
	View kvcache.View `json:"view"`
	Pool struct {
		Total, Free, Cached, Evicted, Live int
	} `json:"pool"`
	Misses map[string]int `json:"misses"`
	Hits   struct {
		Queried, Cached int
	} `json:"hits"`
	Ghosts *struct {
		Queried int64
		Rows    []struct {
			Name string
			Hits int64
		}
	} `json:"ghosts"`
}

func getDebugDoc(t *testing.T, url string) debugDoc {
	t.Helper()
	resp, err := testClient.Get(url + "/debug/cache.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var d debugDoc
	require.NoError(t, json.Unmarshal(body, &d), string(body))
	return d
}

// quietDebugDoc is /debug/cache.json once no sequence is live: a
// request's answer can reach the client before the engine's loop has
// released its sequence.
func quietDebugDoc(t *testing.T, url string) debugDoc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := getDebugDoc(t, url)
		if d.Pool.Live == 0 {
			return d
		}
		require.True(t, time.Now().Before(deadline), "a sequence is still live 10 s after the last answer")
		time.Sleep(10 * time.Millisecond)
	}
}

// debugPrompt is a completion of the token ids ids, under salt.
func debugPrompt(salt string, ids ...int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return `{"prompt": [` + strings.Join(s, ", ") + `], "max_tokens": 2, "temperature": 0, "cache_salt": "` + salt + `"}`
}

func seqIDs(first, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i
	}
	return ids
}

// TestServeDebugCacheDrawsTheRadixTree: serve -debug-cache on the radix
// tree, through real HTTP. Two prompts that share two blocks make a path
// of two nodes, the second with two children; the view's blocks are the
// cached blocks /metrics counts; a salted prompt is a root of its own;
// the ghosts' real row is the engine's hits; and the event stream brings
// a new view after a request.
func TestServeDebugCacheDrawsTheRadixTree(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-blocks", "64", "-prefix-caching", "-ghosts", "-debug-cache")
	shared := seqIDs(10, 8)
	completion(t, url, debugPrompt("", append(append([]int{}, shared...), seqIDs(100, 8)...)...))
	completion(t, url, debugPrompt("", append(append([]int{}, shared...), seqIDs(150, 8)...)...))

	d := quietDebugDoc(t, url)
	assert.Equal(t, "radix", d.View.Design)
	assert.Equal(t, 4, d.View.BlockSize)
	byID := map[int]kvcache.ViewNode{}
	children := map[int][]int{}
	for _, n := range d.View.Nodes {
		byID[n.ID] = n
		children[n.Parent] = append(children[n.Parent], n.ID)
	}
	require.Len(t, children[-1], 1, "one root: the shared first block")
	root := byID[children[-1][0]]
	assert.Equal(t, []int32{10, 11, 12, 13}, root.Tokens)
	require.Len(t, children[root.ID], 1)
	fork := byID[children[root.ID][0]]
	assert.Equal(t, []int32{14, 15, 16, 17}, fork.Tokens)
	assert.Len(t, children[fork.ID], 2, "the last shared block has the two tails as children")

	blocks := 0
	for _, n := range d.View.Nodes {
		blocks += len(n.Blocks)
		assert.Zero(t, n.Users, "no request runs")
		assert.GreaterOrEqual(t, n.EvictRank, 0, "every node can go")
	}
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, metricValue(t, string(page), "kvlab:kv_blocks_cached"), float64(blocks), "the view's blocks are the ones /metrics counts")
	assert.Equal(t, blocks, d.Pool.Cached)
	assert.Equal(t, metricValue(t, string(page), "kvlab:kv_blocks_free"), float64(d.Pool.Free))
	assert.Equal(t, metricValue(t, string(page), "kvlab:prefix_cache_hits_total"), float64(d.Hits.Cached))
	assert.Equal(t, 8, d.Hits.Cached, "the second prompt found the two shared blocks")
	assert.Equal(t, metricValue(t, string(page), `kvlab:prefix_cache_miss_tokens_total{reason="cold"}`), float64(d.Misses["cold"]))
	require.NotNil(t, d.Ghosts)
	require.NotEmpty(t, d.Ghosts.Rows)
	assert.Equal(t, "real", d.Ghosts.Rows[0].Name)
	assert.Equal(t, int64(d.Hits.Cached), d.Ghosts.Rows[0].Hits)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/debug/cache/events", nil)
	require.NoError(t, err)
	sresp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer sresp.Body.Close()
	require.Equal(t, http.StatusOK, sresp.StatusCode)
	views := make(chan debugDoc, 16)
	go func() {
		defer close(views)
		sc := bufio.NewScanner(sresp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v debugDoc
				if json.Unmarshal([]byte(data), &v) == nil {
					views <- v
				}
			}
		}
	}()
	first := <-views
	assert.Equal(t, d.Seq, first.Seq, "nothing changed since the JSON")

	completion(t, url, debugPrompt("tenant-b", append(append([]int{}, shared...), seqIDs(100, 8)...)...))
	deadline := time.After(10 * time.Second)
	var salted debugDoc
	for salted.Seq == 0 {
		select {
		case v, ok := <-views:
			require.True(t, ok, "the stream ended")
			if v.Seq > first.Seq && len(v.View.Nodes) > len(first.View.Nodes) {
				salted = v
			}
		case <-deadline:
			t.Fatal("no new view within 10 s of a request")
		}
	}
	var roots []string
	for _, n := range salted.View.Nodes {
		if n.Parent < 0 {
			roots = append(roots, n.Salt)
		}
	}
	assert.ElementsMatch(t, []string{"", "tenant-b"}, roots, "the salted prompt is a root of its own")
	assert.Positive(t, salted.Misses["salt"], "its shared blocks missed for the salt")

	stop() // with the stream still open: the shutdown ends it
	select {
	case err := <-done:
		require.NoError(t, err, log.String())
	case <-time.After(20 * time.Second):
		t.Fatal("an open /debug/cache/events stream holds the shutdown up")
	}
	for range views { // the stream ends
	}
}

// TestServeDebugCacheIsOffByDefault: without -debug-cache the routes are
// unknown paths (404), and a node cap below 1 is refused.
func TestServeDebugCacheIsOffByDefault(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-prefix-caching")
	for _, p := range []string{"/debug/cache", "/debug/cache.json", "/debug/cache/events"} {
		resp, err := testClient.Get(url + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, p)
	}
	stop()
	require.NoError(t, <-done, log.String())

	err := Serve(context.Background(), cachedVariant, []string{"-port", "0", "-model", dir, "-debug-cache", "-debug-cache-max-nodes", "0"}, nil, &syncBuffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-debug-cache-max-nodes")
}

// TestServeDebugCacheShowsTheTiers: with -cache-ram, /debug/cache.json
// lists the tier with /metrics' counts: the blocks the pool evicted went
// there, and the prompt sent again was served from it.
func TestServeDebugCacheShowsTheTiers(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-blocks", "8", "-prefix-caching", "-cache-ram", "1", "-debug-cache")
	for _, p := range []int{1, 101, 151, 201, 1} {
		completion(t, url, tierPrompt(p))
	}
	resp, err := testClient.Get(url + "/debug/cache.json")
	require.NoError(t, err)
	var d struct {
		Tiers []struct {
			Name     string
			Blocks   int
			Puts     int
			Hits     int
			Promoted int
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	resp.Body.Close()
	require.Len(t, d.Tiers, 1)
	tier := d.Tiers[0]
	assert.Equal(t, "CPU", tier.Name)
	resp, err = testClient.Get(url + "/metrics")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Positive(t, tier.Hits, "the first prompt came back from host memory")
	assert.Equal(t, metricValue(t, string(page), `kvlab:tier_hits_total{tier="CPU"}`), float64(tier.Hits))
	assert.Equal(t, metricValue(t, string(page), `kvlab:tier_puts_total{tier="CPU"}`), float64(tier.Puts))
	assert.Equal(t, metricValue(t, string(page), `kvlab:tier_blocks{tier="CPU"}`), float64(tier.Blocks))
	assert.Equal(t, tier.Hits, tier.Promoted, "one tier: every promotion came from it")
	stop()
	require.NoError(t, <-done, log.String())
}
