package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents"
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
	resp, err := http.Post(url+"/cache/save", "application/json", nil)
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

// TestServeKVEventsOverZeroMQ binds a SUB socket on loopback, as llm-d's
// indexer does, starts serve with -kv-events-endpoint pointing at it, and
// reads vLLM-framed messages until the blocks of a served prompt arrive
// under vLLM's hashes.
func TestServeKVEventsOverZeroMQ(t *testing.T) {
	dir := smallModel(t, "llama")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	require.NoError(t, sub.Listen("tcp://127.0.0.1:0"))
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, ""))
	msgs := make(chan zmq4.Msg, 256)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()

	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching",
		"-kv-events-endpoint", "tcp://"+sub.Addr().String(), "-served-model-name", "m")
	host := strings.TrimPrefix(url, "http://")
	seen := map[kvevents.Hash]bool{}
	var lastSeq uint64
	first := true
	// A PUB socket drops what it sends before the subscriber's
	// subscription reaches it: serve new prompts until one's blocks arrive.
	for i := 0; ; i++ {
		prompt := make([]string, 8)
		ids := make([]int32, 8)
		for j := range prompt {
			ids[j] = int32(10*i + j + 1)
			prompt[j] = fmt.Sprint(ids[j])
		}
		completion(t, url, `{"prompt": [`+strings.Join(prompt, ",")+`], "max_tokens": 1, "temperature": 0}`)
		want := kvevents.BlockHashes(ids, 4, "")
		deadline := time.After(500 * time.Millisecond)
	read:
		for {
			select {
			case m := <-msgs:
				require.Len(t, m.Frames, 3)
				assert.Equal(t, "kv@"+host+"@m", string(m.Frames[0]), "llm-d's kv@<pod>@<model> topic")
				seq := binary.BigEndian.Uint64(m.Frames[1])
				if !first {
					assert.Greater(t, seq, lastSeq)
				}
				first, lastSeq = false, seq
				b, err := kvevents.DecodeVLLM(m.Frames[2])
				require.NoError(t, err)
				for _, ev := range b.Events {
					if ev.Type == kvevents.BlockStored {
						for _, h := range ev.BlockHashes {
							seen[h] = true
						}
					}
				}
			case <-deadline:
				break read
			case <-ctx.Done():
				t.Fatalf("no KV events arrived\n%s", log)
			}
		}
		if seen[want[0]] && seen[want[1]] {
			break
		}
	}
	stop()
	require.NoError(t, <-done, log.String())
}
