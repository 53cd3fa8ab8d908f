package router

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/tokenizer"
)

// The router's pitfalls, one test each (PITFALLS.md). Each fails when its
// fix is undone.

// TestPitfallRouteKeysAreTheExactTokenStreams: canonicalising prompts
// (collapsing whitespace, stripping timestamps) gives different prompts
// one route key, and the router then believes a replica holds a prefix it
// computed for another prompt's text. The key must be the token stream the
// replica computes, byte for byte.
func TestPitfallRouteKeysAreTheExactTokenStreams(t *testing.T) {
	tm := loadTestModel(t)
	const body = "You are a careful assistant. Answer in one sentence, and cite the document you used for every claim you make."
	pairs := [][2]string{
		{"[2026-11-23 09:00:01] " + body, "[2026-11-23 09:00:02] " + body}, // timestamps
		{body, strings.ReplaceAll(body, " ", "  ")},                        // whitespace
		{body, body + "\n"}, // a trailing newline
		{"request 6f1c2a " + body, "request 9b7e01 " + body}, // ids
	}
	var keys []string
	for _, p := range pairs {
		a := RouteKey(tm.tok, "/v1/completions", jsonBody(t, map[string]any{"prompt": p[0]}))
		b := RouteKey(tm.tok, "/v1/completions", jsonBody(t, map[string]any{"prompt": p[1]}))
		keys = append(keys, fmt.Sprintf("%d/%d tokens sharing %d", len(a.Tokens), len(b.Tokens), commonLen(a.Tokens, b.Tokens)))
		// The key is what the replica will compute from the same text.
		require.Equal(t, Key{Tokens: tm.tok.EncodePrompt(p[0])}, a)
		require.Equal(t, Key{Tokens: tm.tok.EncodePrompt(p[1])}, b)
		assert.NotEqual(t, a, b, "%q and %q are different prompts and must have different keys", p[0], p[1])
	}

	// Through the wire: the first prompt goes to a real replica; the
	// second, which differs only in its timestamp near the front, must not
	// be believed to match more than the tokens it really shares, and the
	// replica's own cached_tokens must not exceed that belief.
	rep := startRealReplica(t, tm, replicaConfig(8))
	_, url := startRouter(t, Options{Replicas: []string{rep.url}, Policy: NewPrefix(0.5, 0), Tokenizer: tm.tok})
	first, second := pairs[0][0], pairs[0][1]
	for i, prompt := range []string{first, second} {
		status, _, raw := post(t, url+"/v1/completions", string(jsonBody(t, map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0})))
		require.Equal(t, http.StatusOK, status, string(raw))
		if i == 0 {
			continue
		}
		believed := metricValue(t, url, "kvlab_router:policy_matched_tokens_total", "")
		cached := metricValue(t, url, "kvlab_router:cached_tokens_total", "")
		shared := commonLen(tm.tok.EncodePrompt(first), tm.tok.EncodePrompt(second))
		assert.LessOrEqual(t, int(believed), shared, "the router believed %v tokens matched; the prompts share %d", believed, shared)
		assert.LessOrEqual(t, cached, believed, "the replica found %v cached, the router believed %v", cached, believed)
		t.Logf("4 prompt pairs a canonicaliser would give one key (timestamp, whitespace, trailing newline, id) keep distinct exact-token keys (%s); through a replica, the second timestamped prompt shares %d of %d tokens with the first, the router believed %v matched and the replica found %v cached",
			strings.Join(keys, "; "), shared, len(tm.tok.EncodePrompt(second)), believed, cached)
		assert.Less(t, shared, len(tm.tok.EncodePrompt(second))/2, "the test needs prompts that differ near the front")
	}
}

// TestPitfallHitsAreTheReplicasCachedTokensSummedAtTheRouter: routing
// state kept per front-end worker (here two routers in front of one
// replica, as two server processes would be) sees only its own share of
// the traffic, so a worker whose own tree never matched reads 0% hits while
// the replica reuses KV. The hit count must be what the replica reported,
// summed at the router.
func TestPitfallHitsAreTheReplicasCachedTokensSummedAtTheRouter(t *testing.T) {
	tm := loadTestModel(t)
	rep := startRealReplica(t, tm, replicaConfig(8))
	w1, url1 := startRouter(t, Options{Replicas: []string{rep.url}, Policy: NewPrefix(0.5, 0), Tokenizer: tm.tok})
	w2, url2 := startRouter(t, Options{Replicas: []string{rep.url}, Policy: NewPrefix(0.5, 0), Tokenizer: tm.tok})

	system := seq(10, 40)
	r := stream(t.Context(), url1, completionBody(cat(system, seq(300, 5)), 3), nil)
	require.True(t, r.done, r.errMsg)
	r = stream(t.Context(), url2, completionBody(cat(system, seq(400, 5)), 3), nil)
	require.True(t, r.done, r.errMsg)
	require.Equal(t, 40, r.cached, "the replica found the shared 40 tokens (10 blocks of 4)")

	// The symptom: worker 2's own routing state never saw the prefix.
	t.Logf("with the bug (hits from worker 2's own routing state): %v of 40 shared tokens matched, a 0%% hit rate; fixed (the replica's cached_tokens, summed at the router): worker 2 counts %v, the workers together %d, the replica's own counter %v",
		metricValue(t, url2, "kvlab_router:policy_matched_tokens_total", ""), metricValue(t, url2, "kvlab_router:cached_tokens_total", ""),
		w1.Stats()[0].CachedTokens+w2.Stats()[0].CachedTokens, metricValue(t, rep.url, "kvlab:prefix_cache_hits_total", ""))
	assert.Zero(t, metricValue(t, url2, "kvlab_router:policy_matched_tokens_total", ""), "worker 2's tree matched nothing")
	// The fix: worker 2's hit count is the replica's own answer.
	assert.Equal(t, 40.0, metricValue(t, url2, "kvlab_router:cached_tokens_total", ""))
	fleet := w1.Stats()[0].CachedTokens + w2.Stats()[0].CachedTokens
	assert.Equal(t, 40, fleet)
	assert.Equal(t, float64(fleet), metricValue(t, rep.url, "kvlab:prefix_cache_hits_total", ""),
		"summed over the workers, the router's count is the replica's own counter")
}

// TestPitfallTheChosenReplicaReceivesTheBytes: a replica computed by the
// policy but never used on the wire (an id_slot computed and never put in
// the payload) passes every test of the routing function. So this
// test reads what each replica received: the request the policy sent to
// replica k must arrive at replica k, byte for byte, and nowhere else —
// on all three endpoints.
func TestPitfallTheChosenReplicaReceivesTheBytes(t *testing.T) {
	tm := loadTestModel(t)
	fakes := []*fakeReplica{newFakeReplica(t, 0), newFakeReplica(t, 0), newFakeReplica(t, 0)}
	urls := []string{fakes[0].srv.URL, fakes[1].srv.URL, fakes[2].srv.URL}
	pol := &recordingPolicy{Policy: NewPrefix(0.5, 0)}
	rt, url := startRouter(t, Options{Replicas: urls, Policy: pol, Tokenizer: tm.tok})

	system := seq(20, 64)
	msgs := []tokenizer.Message{{Role: "system", Content: "You answer questions about the cache, briefly and exactly, every time you are asked."}, {Role: "user", Content: "Hi"}}
	chatMsgs := func(user string) []map[string]string {
		return []map[string]string{{"role": "system", "content": msgs[0].Content}, {"role": "user", "content": user}}
	}
	type call struct{ path, body string }
	// Each group shares a long prefix; the first of a group picks a replica
	// by load, the others must follow it.
	groups := [][]call{
		{
			{"/v1/completions", string(jsonBody(t, map[string]any{"prompt": cat(system, seq(500, 4)), "max_tokens": 1}))},
			{"/v1/completions", string(jsonBody(t, map[string]any{"prompt": cat(system, seq(600, 4)), "max_tokens": 1}))},
			{"/completion", string(jsonBody(t, map[string]any{"prompt": cat(system, seq(700, 4)), "n_predict": 1}))},
		},
		{
			{"/v1/chat/completions", string(jsonBody(t, map[string]any{"messages": chatMsgs("Hello there"), "max_tokens": 1}))},
			{"/v1/chat/completions", string(jsonBody(t, map[string]any{"messages": chatMsgs("Good morning"), "max_tokens": 1}))},
		},
	}
	want := make([][]received, 3)
	homes := map[int]bool{}
	for _, g := range groups {
		home := -1
		for i, c := range g {
			status, rep, raw := post(t, url+c.path, c.body)
			require.Equal(t, http.StatusOK, status, string(raw))
			d := pol.last()
			if i == 0 {
				home = d.Replica
				homes[home] = true
			}
			require.Equal(t, home, d.Replica, "%s: the policy should follow the shared prefix", c.path)
			assert.Equal(t, d.Replica, rep, "the response says replica %d served what the policy sent to %d", rep, d.Replica)
			want[d.Replica] = append(want[d.Replica], received{c.path, []byte(c.body)})
		}
	}
	require.Len(t, homes, 2, "the two groups should start on different replicas (least-load, then the emptier tree)")
	var got []string
	for i, f := range fakes {
		got = append(got, fmt.Sprintf("replica %d: %d sent, %d received", i, len(want[i]), len(f.received())))
	}
	t.Logf("what the policy chose is what arrived, byte for byte, over 3 endpoints (%s); a replica chosen and never put on the wire would leave these counts apart", strings.Join(got, ", "))
	for i, f := range fakes {
		if diff := cmp.Diff(want[i], f.received()); diff != "" {
			t.Errorf("replica %d received (-want +got):\n%s", i, diff)
		}
	}
	// The router's own count agrees with the wire.
	for i, st := range rt.Stats() {
		assert.Equal(t, len(want[i]), st.Requests, "replica %d", i)
	}
}

// recordingPolicy remembers the decisions of the policy it wraps.
type recordingPolicy struct {
	Policy
	mu        sync.Mutex
	decisions []Decision
}

func (p *recordingPolicy) Pick(key Key, cands []Candidate) Decision {
	d := p.Policy.Pick(key, cands)
	p.mu.Lock()
	p.decisions = append(p.decisions, d)
	p.mu.Unlock()
	return d
}

func (p *recordingPolicy) last() Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.decisions[len(p.decisions)-1]
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
