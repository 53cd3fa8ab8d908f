package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents"
	"kvlab/common/kvevents/kveventstest"
	"kvlab/common/server"
)

func tokenIDs(r map[string]any) any { return r["choices"].([]any)[0].(map[string]any)["token_ids"] }

// TestServeCacheDirSurvivesARestart is the persistent tier over the wire:
// serve, answer a request, POST /cache/save, stop, start again on the same
// directory, and the same request finds its prompt cached and answers the
// same tokens. A server with another block size refuses the file, says why
// in its log, and serves from an empty cache.
func TestServeCacheDirSurvivesARestart(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDir := t.TempDir()
	body := `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 4, "temperature": 0, "ignore_eos": true, "return_token_ids": true}`
	args := []string{"-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir}

	url, stop, done, log := startServe(t, cachedVariant, args...)
	cold := completion(t, url, body)
	require.Zero(t, cachedTokens(cold))
	resp, err := testClient.Post(url+"/cache/save", "application/json", nil)
	require.NoError(t, err)
	var saved map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&saved))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, saved)
	assert.Positive(t, saved["saved_blocks"])
	stop()
	require.NoError(t, <-done, log.String())
	assert.Contains(t, log.String(), "no saved cache in")
	assert.Contains(t, log.String(), "saved ")
	_, err = os.Stat(filepath.Join(cacheDir, server.CacheFileName))
	require.NoError(t, err)

	url, stop, done, log = startServe(t, cachedVariant, args...)
	assert.Contains(t, log.String(), "restored ")
	warm := completion(t, url, body)
	assert.Equal(t, tokenIDs(cold), tokenIDs(warm), "a restored prefix gives the cold run's tokens")
	assert.Equal(t, 8.0, cachedTokens(warm), "two whole blocks come from the file")
	stop()
	require.NoError(t, <-done, log.String())

	url, stop, done, log = startServe(t, cachedVariant, "-model", dir, "-block-size", "8", "-prefix-caching", "-cache-dir", cacheDir)
	assert.Contains(t, log.String(), "written for another configuration")
	assert.Contains(t, log.String(), "starting with an empty cache")
	assert.Zero(t, cachedTokens(completion(t, url, body)))
	stop()
	require.NoError(t, <-done, log.String())
}

func TestServeKVEventFlagsNeedACache(t *testing.T) {
	for _, flag := range [][]string{{"-kv-events"}, {"-cache-dir", t.TempDir()}, {"-kv-events-endpoint", "tcp://127.0.0.1:1"}} {
		err := Serve(context.Background(), cachedVariant, append([]string{"-port", "0"}, flag...), nil, &syncBuffer{})
		assert.ErrorContains(t, err, "need -prefix-caching", flag)
	}
}

// zmqSub is a SUB socket on loopback delivering its messages on a channel.
func zmqSub(t *testing.T, ctx context.Context, endpoint string, bind bool) (zmq4.Socket, <-chan zmq4.Msg) {
	t.Helper()
	sub := zmq4.NewSub(ctx)
	t.Cleanup(func() { sub.Close() })
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))
	if bind {
		require.NoError(t, sub.Listen(endpoint))
	} else {
		require.NoError(t, sub.Dial(endpoint))
	}
	msgs := make(chan zmq4.Msg, 256)
	go func() {
		defer close(msgs)
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	return sub, msgs
}

// kvMsg is one message of vLLM's three frames, decoded.
type kvMsg struct {
	topic   string
	seq     uint64
	payload []byte
	batch   kvevents.Batch
}

func nextKV(t *testing.T, ctx context.Context, msgs <-chan zmq4.Msg, log fmt.Stringer) kvMsg {
	t.Helper()
	select {
	case m, ok := <-msgs:
		require.True(t, ok, "the subscriber closed")
		require.Len(t, m.Frames, 3, "topic, sequence, payload")
		require.Len(t, m.Frames[1], 8)
		b, err := kvevents.DecodeVLLM(m.Frames[2])
		require.NoError(t, err)
		return kvMsg{string(m.Frames[0]), binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2], b}
	case <-ctx.Done():
		t.Fatalf("no KV events arrived\n%s", log)
		return kvMsg{}
	}
}

// nextSnapshot returns the next batch that describes the whole cache. The
// server publishes what it had queued before the snapshot (AddPublisher),
// so a subscriber that arrives while events are still queued (a restore's,
// say) first gets those: live batches of BlockStored events, skipped here.
func nextSnapshot(t *testing.T, ctx context.Context, msgs <-chan zmq4.Msg, log fmt.Stringer) kvMsg {
	t.Helper()
	for {
		m := nextKV(t, ctx, msgs, log)
		require.NotEmpty(t, m.batch.Events)
		if m.batch.Events[0].Type == kvevents.AllBlocksCleared {
			requireSnapshot(t, m)
			return m
		}
		for _, ev := range m.batch.Events {
			require.Equal(t, kvevents.BlockStored, ev.Type, "before the snapshot, only what was queued: stored blocks")
		}
	}
}

// requireSnapshot checks that m is the whole cache: AllBlocksCleared, then
// BlockStored events only.
func requireSnapshot(t *testing.T, m kvMsg) {
	t.Helper()
	require.NotEmpty(t, m.batch.Events)
	require.Equal(t, kvevents.AllBlocksCleared, m.batch.Events[0].Type, "a snapshot starts by clearing")
	for _, ev := range m.batch.Events[1:] {
		require.Equal(t, kvevents.BlockStored, ev.Type)
	}
}

// TestServeKVEventsOverZeroMQ binds a SUB socket on loopback, as llm-d's
// indexer can, starts serve with -kv-events-endpoint pointing at it, and
// reads vLLM-framed messages: first the whole cache (sent once the
// subscription reached the server), then a served prompt's blocks under
// vLLM's hashes.
func TestServeKVEventsOverZeroMQ(t *testing.T) {
	dir := smallModel(t, "llama")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, msgs := zmqSub(t, ctx, "tcp://127.0.0.1:0", true)

	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching",
		"-kv-events-endpoint", "tcp://"+sub.Addr().String(), "-served-model-name", "m")
	host := strings.TrimPrefix(url, "http://")
	first := nextKV(t, ctx, msgs, log)
	requireSnapshot(t, first)
	assert.Equal(t, "kv@"+host+"@m", first.topic, "llm-d's kv@<pod>@<model> topic, the listen address")

	ids := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	completion(t, url, `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": 1, "temperature": 0}`)
	want := kvevents.BlockHashes(ids, 4, "")
	seen := map[kvevents.Hash]bool{}
	last := first.seq
	for !seen[want[0]] || !seen[want[1]] {
		m := nextKV(t, ctx, msgs, log)
		assert.Equal(t, last+1, m.seq, "no batch lost after the subscription")
		last = m.seq
		for _, ev := range m.batch.Events {
			for _, h := range ev.BlockHashes {
				seen[h] = ev.Type == kvevents.BlockStored
			}
		}
	}
	stop()
	require.NoError(t, <-done, log.String())
}

var boundRE = regexp.MustCompile(`KV events on \S+ \(bound ([^)]+)\)`)
var replayRE = regexp.MustCompile(`KV event replay on \S+ \(bound ([^)]+)\)`)
var restoredRE = regexp.MustCompile(`restored (\d+) cached KV blocks`)

func loopbackOf(t *testing.T, re *regexp.Regexp, log string) string {
	t.Helper()
	m := re.FindStringSubmatch(log)
	require.NotNil(t, m, "%s not in the log:\n%s", re, log)
	_, port, err := net.SplitHostPort(m[1])
	require.NoError(t, err)
	return "tcp://127.0.0.1:" + port
}

// llmdLearns feeds payloads to the model of llm-d's indexer and returns it.
func llmdLearns(t *testing.T, blockSize int, payloads ...[]byte) *kveventstest.LLMDIndex {
	t.Helper()
	idx := kveventstest.NewLLMDIndex(blockSize)
	for _, p := range payloads {
		b, err := kveventstest.DecodeLLMD(p)
		require.NoError(t, err)
		idx.Apply(b)
	}
	return idx
}

// TestServeRestoredCacheReachesAFreshSubscriber: a server restarted on its
// -cache-dir announces what it restored, to subscribers that connect after
// the restore. A fresh subscriber's first message is the whole restored
// cache, which llm-d's indexer (modelled by kveventstest.LLMDIndex: whole
// blocks of token ids, parents it has seen) indexes whole; one that
// reconnects learns it again; and the replay socket gives the same to a
// subscriber that asks for everything from sequence 0.
func TestServeRestoredCacheReachesAFreshSubscriber(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDir := t.TempDir()
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	body := `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], "max_tokens": 2, "temperature": 0, "ignore_eos": true}`
	args := []string{"-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir}
	url, stop, done, log := startServe(t, cachedVariant, args...)
	completion(t, url, body)
	stop()
	require.NoError(t, <-done, log.String())

	_, stop, done, log = startServe(t, cachedVariant, append(args,
		"-kv-events-endpoint", "tcp://*:0", "-kv-events-replay-endpoint", "tcp://*:0", "-kv-events-buffer-steps", "100",
		"-kv-events-advertise", "10.1.2.3:8000", "-served-model-name", "m")...)
	m := restoredRE.FindStringSubmatch(log.String())
	require.NotNil(t, m, log.String())
	restored, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	want := kvevents.BlockHashes(prompt, 4, "")
	require.Len(t, want, 3)
	require.GreaterOrEqual(t, restored, len(want), "the prompt's three whole blocks at least")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pubAddr := loopbackOf(t, boundRE, log.String())
	for round := range 2 { // a fresh subscriber, then one that connects again
		sub, msgs := zmqSub(t, ctx, pubAddr, false)
		snap := nextSnapshot(t, ctx, msgs, log)
		assert.Equal(t, "kv@10.1.2.3:8000@m", snap.topic, "the advertised address")
		assert.Len(t, snap.batch.Events, 1+restored, "round %d: every restored block, one event each", round)
		idx := llmdLearns(t, 4, snap.payload)
		assert.Empty(t, idx.Dropped, "round %d: %s", round, idx)
		assert.Len(t, idx.Held, restored, "round %d", round)
		for _, h := range want {
			assert.True(t, idx.Held[h.Uint64()], "round %d: llm-d holds the prompt's block %s", round, h)
		}
		require.NoError(t, sub.Close())
	}

	replayed, err := kvevents.Replay(ctx, loopbackOf(t, replayRE, log.String()), 0)
	require.NoError(t, err)
	require.NotEmpty(t, replayed)
	var payloads [][]byte
	for i, r := range replayed {
		assert.Equal(t, "kv@10.1.2.3:8000@m", r.Topic)
		assert.Equal(t, uint64(i), r.Seq, "the buffer holds every batch from 0")
		payloads = append(payloads, r.Payload)
	}
	idx := llmdLearns(t, 4, payloads...)
	assert.Empty(t, idx.Dropped, idx)
	assert.Len(t, idx.Held, restored, "replaying from 0 teaches every restored block")
	stop()
	require.NoError(t, <-done, log.String())
}

// TestServeKVEventsAdvertise: a server listening on every interface must be
// told the address its topic names.
func TestServeKVEventsAdvertise(t *testing.T) {
	dir := smallModel(t, "llama")
	log := &syncBuffer{}
	err := Serve(context.Background(), cachedVariant, []string{"-model", dir, "-prefix-caching", "-host", "0.0.0.0", "-port", "0",
		"-kv-events-endpoint", "tcp://127.0.0.1:1"}, nil, log)
	assert.ErrorContains(t, err, "-kv-events-advertise", log.String())
	for _, flags := range [][]string{
		{"-kv-events-advertise", "10.0.0.1:8000"},
		{"-kv-events-replay-endpoint", "tcp://*:5558"},
	} {
		err := Serve(context.Background(), cachedVariant, append([]string{"-prefix-caching", "-port", "0"}, flags...), nil, &syncBuffer{})
		assert.ErrorContains(t, err, "need -kv-events-endpoint", flags)
	}
	err = Serve(context.Background(), cachedVariant, []string{"-prefix-caching", "-port", "0", "-kv-events-endpoint", "tcp://*:0", "-kv-events-buffer-steps", "-1"}, nil, &syncBuffer{})
	assert.ErrorContains(t, err, "-kv-events-buffer-steps")
}
