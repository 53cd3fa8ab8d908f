package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents"
)

// stored is the BlockStored event of the full blocks of tokens, chained
// from the first block, as a replica announces a prompt it cached.
func stored(tokens []int32, blockSize int) kvevents.Event {
	hashes := kvevents.BlockHashes(tokens, blockSize, "")
	return kvevents.Event{Type: kvevents.BlockStored, BlockHashes: hashes, TokenIDs: tokens[:len(hashes)*blockSize], BlockSize: blockSize}
}

func TestKVIndexScoresLeadingBlocks(t *testing.T) {
	x := NewKVIndex(4)
	a := seq(1, 16) // 4 blocks
	x.Apply(0, kvevents.Batch{Events: []kvevents.Event{stored(a, 4)}})
	x.Apply(1, kvevents.Batch{Events: []kvevents.Event{stored(a[:8], 4)}})
	assert.Equal(t, map[int]int{0: 16, 1: 8}, x.Match(Key{Tokens: cat(a, seq(90, 3))}, idle(3)))

	// A removed middle block breaks the chain: the blocks after it cannot
	// be reused even though the replica still holds them.
	hashes := kvevents.BlockHashes(a, 4, "")
	x.Apply(0, kvevents.Batch{Events: []kvevents.Event{{Type: kvevents.BlockRemoved, BlockHashes: hashes[1:2]}}})
	assert.Equal(t, map[int]int{0: 4, 1: 8}, x.Match(Key{Tokens: a}, idle(3)))
	assert.Equal(t, 3, x.Blocks(0))

	// The same tokens at another position hash differently: the hash of
	// block 1 covers block 0 too.
	assert.Empty(t, x.Match(Key{Tokens: a[4:]}, idle(3)))

	x.Apply(1, kvevents.Batch{Events: []kvevents.Event{{Type: kvevents.AllBlocksCleared}}})
	assert.Equal(t, map[int]int{0: 4}, x.Match(Key{Tokens: a}, idle(3)))
	x.Reset(0)
	assert.Empty(t, x.Match(Key{Tokens: a}, idle(3)))
	assert.False(t, x.Live(0))
}

func TestKVEventsPolicyRoutesToTheReplicaThatHoldsThePrefix(t *testing.T) {
	x := NewKVIndex(4)
	p := NewKVEvents(x, 0.5)
	sysA, sysB := seq(100, 32), seq(200, 32)
	x.Apply(0, kvevents.Batch{Events: []kvevents.Event{stored(sysB, 4)}})
	x.Apply(2, kvevents.Batch{Events: []kvevents.Event{stored(sysA, 4)}})

	assert.Equal(t, Decision{Replica: 2, Matched: 32, Reason: "kv-match"}, p.Pick(Key{Tokens: cat(sysA, seq(1, 6))}, idle(3)))
	assert.Equal(t, Decision{Replica: 0, Matched: 32, Reason: "kv-match"}, p.Pick(Key{Tokens: cat(sysB, seq(1, 6))}, idle(3)))
	// Nobody holds it: the least-loaded replica, and among the idle ones
	// the one holding the fewest blocks.
	assert.Equal(t, Decision{Replica: 1, Reason: "least-load"}, p.Pick(Key{Tokens: seq(300, 20)}, idle(3)))
	// Routing teaches it nothing; only the replica's events do.
	p.Routed(Key{Tokens: seq(300, 20)}, 1)
	assert.Equal(t, "least-load", p.Pick(Key{Tokens: seq(300, 20)}, idle(3)).Reason)
	p.Down(2)
	assert.Equal(t, "least-load", p.Pick(Key{Tokens: cat(sysA, seq(1, 6))}, idle(3)).Reason)
}

// TestSubscribeFollowsAFakeEventStream serves /v1/kv_events from a fake
// replica: a snapshot on connect, then a removal, then a broken stream and
// a second connection whose snapshot says the cache was emptied.
func TestSubscribeFollowsAFakeEventStream(t *testing.T) {
	prompt := seq(1, 12) // 3 blocks of 4
	hashes := kvevents.BlockHashes(prompt, 4, "")
	removeNow := make(chan struct{})
	connections := 0
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, kvevents.StreamPath, r.URL.Path)
		connections++
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(b kvevents.Batch) {
			data, _ := json.Marshal(b)
			fmt.Fprintf(w, "data: %s\n\n", data)
			w.(http.Flusher).Flush()
		}
		if connections == 1 {
			send(kvevents.Batch{TS: 1, Events: []kvevents.Event{{Type: kvevents.AllBlocksCleared}, stored(prompt, 4)}})
			<-removeNow
			send(kvevents.Batch{TS: 2, Events: []kvevents.Event{{Type: kvevents.BlockRemoved, BlockHashes: hashes[2:]}}})
			return // the stream breaks
		}
		send(kvevents.Batch{TS: 3, Events: []kvevents.Event{{Type: kvevents.AllBlocksCleared}}})
		<-r.Context().Done()
	}))
	t.Cleanup(rep.Close)

	x := NewKVIndex(16) // the events teach it the replicas' block size
	// The index is read in the callback, right after the batch is applied:
	// once the stream breaks the subscriber forgets it all.
	type seen struct {
		ts    float64
		match map[int]int
	}
	got := make(chan seen, 8)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		Subscribe(ctx, nil, rep.URL, 0, x, 10*time.Millisecond, func(b kvevents.Batch) { got <- seen{b.TS, x.Match(Key{Tokens: prompt}, idle(1))} })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() seen {
		select {
		case b := <-got:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no batch")
			return seen{}
		}
	}

	assert.Equal(t, seen{1, map[int]int{0: 12}}, next())
	assert.True(t, x.Live(0))
	assert.Equal(t, 4, x.BlockSize())
	close(removeNow)
	assert.Equal(t, seen{2, map[int]int{0: 8}}, next())
	assert.Equal(t, seen{3, map[int]int{}}, next(), "the subscriber connects again after the stream breaks")
}

// TestKVEventsPolicyOverRealReplicas: three replicas publish their KV
// events; a second conversation on the first one's system prompt is sent
// where the first one's blocks are, as the events say, and that replica
// reports them cached.
func TestKVEventsPolicyOverRealReplicas(t *testing.T) {
	tm := loadTestModel(t)
	reps := []*realReplica{startReplica(t, tm, replicaConfig(8), true), startReplica(t, tm, replicaConfig(8), true), startReplica(t, tm, replicaConfig(8), true)}
	x := NewKVIndex(16) // wrong on purpose: the replicas' events say 4
	rt, url := startRouter(t, Options{Replicas: []string{reps[0].url, reps[1].url, reps[2].url}, Policy: NewKVEvents(x, 0.5)})
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	rt.SubscribeAll(ctx, x)
	require.Eventually(t, func() bool { return x.Live(0) && x.Live(1) && x.Live(2) }, 10*time.Second, 5*time.Millisecond, "every replica's snapshot")

	system := seq(30, 48)
	first := stream(ctx, url, completionBody(cat(system, seq(100, 6)), 4), nil)
	require.True(t, first.done, first.errMsg)
	// The replica announces the prompt's blocks once it has committed them.
	require.Eventually(t, func() bool { return x.Blocks(first.replica) >= 12 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 4, x.BlockSize())

	for i := range 3 {
		r := stream(ctx, url, completionBody(cat(system, seq(200+10*i, 6)), 4), nil)
		require.True(t, r.done, r.errMsg)
		assert.Equal(t, first.replica, r.replica, "conversation %d", i)
		assert.Equal(t, 48, r.cached, "conversation %d found the system prompt's 12 blocks", i)
	}
	assert.Equal(t, 3.0, metricValue(t, url, "kvlab_router:decisions_total", `reason="kv-match"`))
}

// TestKVIndexHashesAsTheReplicasDo: replicas that name blocks under
// another algorithm, seed or LoRA name are matched only by an index told
// the same (KVIndex.Hasher).
func TestKVIndexHashesAsTheReplicasDo(t *testing.T) {
	hs := kvevents.NewHasher(kvevents.XXHash, "7", "adapter-1")
	a := seq(1, 12)
	hashes := hs.BlockHashes(a, 4, "")
	ev := kvevents.Event{Type: kvevents.BlockStored, BlockHashes: hashes, TokenIDs: a, BlockSize: 4}

	told := NewKVIndex(4)
	told.Hasher = hs
	told.Apply(0, kvevents.Batch{Events: []kvevents.Event{ev}})
	assert.Equal(t, map[int]int{0: 12}, told.Match(Key{Tokens: a}, idle(2)))

	untold := NewKVIndex(4)
	untold.Apply(0, kvevents.Batch{Events: []kvevents.Event{ev}})
	assert.Empty(t, untold.Match(Key{Tokens: a}, idle(2)), "sha256_cbor names none of them")
}
