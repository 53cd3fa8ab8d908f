package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvevents"
	"kvlab/common/kvevents/kveventstest"
)

// startEventServer is startServer with KV events on: the pool's observer,
// the publisher running, GET /v1/kv_events served.
func startEventServer(t *testing.T, tm testModel, cfg engine.Config) (*testServer, *KVEvents) {
	t.Helper()
	e, err := engine.New(tm.m, cfg)
	require.NoError(t, err)
	obs := e.Pool().Observe(kvevents.DefaultHashSeed)
	require.NotNil(t, obs)
	ev := NewKVEvents(obs)
	es := engine.NewServer(e)
	h := New(es, Options{Tokenizer: tm.tok, PrefixCaching: true, KVEvents: ev})
	ctx, cancel := context.WithCancel(context.Background())
	done, evDone := make(chan struct{}), make(chan struct{})
	go func() { es.Run(ctx); close(done) }()
	go func() { ev.Run(ctx); close(evDone) }()
	hs := httptest.NewServer(h)
	ts := &testServer{url: hs.URL, e: e, es: es, h: h}
	stopped := false
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ev.Close() // as serve does on shutdown: streams end, Close can return
		hs.Close()
		cancel()
		<-done
		<-evDone
	}
	t.Cleanup(func() {
		ts.stop()
		require.NoError(t, e.Pool().Audit().Err())
		e.Close()
	})
	return ts, ev
}

// subscribe opens GET /v1/kv_events and returns its batches as they come.
func subscribe(t *testing.T, url string) (<-chan kvevents.Batch, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+kvevents.StreamPath, nil)
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out, end := make(chan kvevents.Batch, 64), make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		end <- kvevents.ReadStream(ctx, resp.Body, func(b kvevents.Batch) error { out <- b; return nil })
		close(out)
	}()
	return out, end
}

func next(t *testing.T, ch <-chan kvevents.Batch) kvevents.Batch {
	t.Helper()
	select {
	case b, ok := <-ch:
		require.True(t, ok, "the stream ended")
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no batch")
		return kvevents.Batch{}
	}
}

// stored collects the hashes of every BlockStored in b, in order.
func stored(b kvevents.Batch) []kvevents.Hash {
	var hs []kvevents.Hash
	for _, ev := range b.Events {
		if ev.Type == kvevents.BlockStored {
			hs = append(hs, ev.BlockHashes...)
		}
	}
	return hs
}

// TestKVEventStream serves a request and reads, over HTTP, the blocks it
// left in the cache: their hashes are vLLM's hashes of the prompt's blocks
// (kvevents.BlockHashes, checked against vLLM's algorithm by the golden
// vectors). A subscriber that connects afterwards learns the same blocks
// from its first batch, and shutting the server down ends both streams.
func TestKVEventStream(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	ts, _ := startEventServer(t, tm, cfg)

	early, earlyEnd := subscribe(t, ts.url)
	first := next(t, early)
	assert.Equal(t, []kvevents.Event{{Type: kvevents.AllBlocksCleared}}, first.Events, "an empty cache: clear, nothing stored")
	assert.InDelta(t, float64(time.Now().Unix()), first.TS, 60)

	prompt := []int32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(body))

	want := kvevents.BlockHashes(prompt, cfg.BlockSize, "") // two whole blocks; the third is partial
	require.Len(t, want, 2)
	var got []kvevents.Hash
	for len(got) < len(want) {
		b := next(t, early)
		got = append(got, stored(b)...)
		for _, ev := range b.Events {
			if ev.Type == kvevents.BlockStored {
				assert.Equal(t, cfg.BlockSize, ev.BlockSize)
				assert.Len(t, ev.TokenIDs, cfg.BlockSize*len(ev.BlockHashes))
			}
		}
	}
	assert.Equal(t, want, got[:len(want)], "the prompt's blocks, under vLLM's hashes, parents first")

	late, lateEnd := subscribe(t, ts.url)
	state := next(t, late)
	require.NotEmpty(t, state.Events)
	assert.Equal(t, kvevents.AllBlocksCleared, state.Events[0].Type)
	assert.Subset(t, stored(state), want, "a late subscriber learns what is cached")
	for _, ev := range state.Events[1:] {
		if ev.BlockHashes[0] == want[1] {
			require.NotNil(t, ev.ParentBlockHash)
			assert.Equal(t, want[0], *ev.ParentBlockHash)
			assert.Equal(t, prompt[4:8], ev.TokenIDs)
		}
	}

	ts.stop()
	for _, end := range []<-chan error{earlyEnd, lateEnd} {
		select {
		case err := <-end:
			assert.NoError(t, err, "the stream ends cleanly")
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end at shutdown")
		}
	}
}

func TestKVEventStreamOff(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{})
	resp, err := testClient.Get(ts.url + kvevents.StreamPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestKVEventsTopic(t *testing.T) {
	for _, c := range []struct{ advertise, listen, model, want, err string }{
		{"", "127.0.0.1:8000", "m", "kv@127.0.0.1:8000@m", ""},
		{"", "[::1]:8000", "m", "kv@[::1]:8000@m", ""},
		{"10.0.0.7:8000", "0.0.0.0:8000", "m", "kv@10.0.0.7:8000@m", ""},
		{"pod-3.svc:8000", "[::]:8000", "m", "kv@pod-3.svc:8000@m", ""},
		{"", "0.0.0.0:8000", "m", "", "every interface"},
		{"", "[::]:8000", "m", "", "every interface"},
		{"0.0.0.0:8000", "0.0.0.0:8000", "m", "", "no reachable host"},
		{"10.0.0.7", "0.0.0.0:8000", "m", "", "not host:port"},
		{"", "127.0.0.1:8000", "org@model", "", "would not split"},
	} {
		got, err := KVEventsTopic(c.advertise, c.listen, c.model)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "%+v", c)
			continue
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got)
	}
}

// TestKVEventsSnapshotOnSubscribe attaches a ZeroMQ publisher to a server
// that already holds a prompt's blocks, and connects subscribers to it: the
// first message each one receives is the whole cache (AllBlocksCleared,
// then the blocks, parents first), which llm-d's indexer, fed only that,
// indexes whole; live batches follow with the next sequence numbers.
func TestKVEventsSnapshotOnSubscribe(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	ts, ev := startEventServer(t, tm, cfg)
	prompt := []int32{31, 32, 33, 34, 35, 36, 37, 38, 39, 40}
	status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(body))
	want := kvevents.BlockHashes(prompt, cfg.BlockSize, "")
	require.Len(t, want, 2)

	pub, err := kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: "tcp://*:0", Topic: "kv@t:1@m"})
	require.NoError(t, err)
	defer pub.Close()
	var logged []string
	ev.AddPublisher(pub, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	_, port, err := net.SplitHostPort(pub.Addr())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() <-chan zmq4.Msg {
		sub := zmq4.NewSub(ctx)
		t.Cleanup(func() { sub.Close() })
		require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, ""))
		require.NoError(t, sub.Dial("tcp://127.0.0.1:"+port))
		ch := make(chan zmq4.Msg, 16)
		go func() {
			for {
				m, err := sub.Recv()
				if err != nil {
					return
				}
				ch <- m
			}
		}()
		return ch
	}
	recv := func(ch <-chan zmq4.Msg) (uint64, kvevents.Batch, []byte) {
		select {
		case m := <-ch:
			require.Len(t, m.Frames, 3)
			b, err := kvevents.DecodeVLLM(m.Frames[2])
			require.NoError(t, err)
			return binary.BigEndian.Uint64(m.Frames[1]), b, m.Frames[2]
		case <-ctx.Done():
			t.Fatal("nothing arrived")
			return 0, kvevents.Batch{}, nil
		}
	}

	first := connect()
	seq, snap, payload := recv(first)
	assert.Equal(t, uint64(0), seq, "the snapshot is the first batch published")
	require.NotEmpty(t, snap.Events)
	assert.Equal(t, kvevents.AllBlocksCleared, snap.Events[0].Type)
	assert.Subset(t, stored(snap), want)
	idx := kveventstest.NewLLMDIndex(cfg.BlockSize)
	lb, err := kveventstest.DecodeLLMD(payload)
	require.NoError(t, err)
	idx.Apply(lb)
	assert.Empty(t, idx.Dropped, "llm-d indexes every block of the snapshot: %s", idx)
	for _, h := range want {
		assert.True(t, idx.Held[h.Uint64()], "llm-d holds %s", h)
	}

	// A live batch follows with the next number.
	more := []int32{41, 42, 43, 44, 45}
	status, body = post(t, ts.url+"/v1/completions", map[string]any{"prompt": more, "max_tokens": 1, "temperature": 0})
	require.Equal(t, http.StatusOK, status, string(body))
	seq, live, _ := recv(first)
	assert.Equal(t, uint64(1), seq)
	assert.Contains(t, stored(live), kvevents.BlockHashes(more, cfg.BlockSize, "")[0])

	// A second subscriber gets a snapshot of its own, which the first sees too.
	second := connect()
	seq, snap2, _ := recv(second)
	assert.Equal(t, uint64(2), seq)
	assert.Subset(t, stored(snap2), append(want, kvevents.BlockHashes(more, cfg.BlockSize, "")[0]))
	seq, _, _ = recv(first)
	assert.Equal(t, uint64(2), seq, "PUB sends the snapshot to every subscriber")
	assert.Empty(t, logged)
}
