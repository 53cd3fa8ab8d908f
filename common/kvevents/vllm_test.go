package kvevents

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// fixtures is testdata/vllm_events.json, written by
// scripts/vllm_event_fixtures.py with Python's msgpack from vLLM's
// documented KVEventBatch layouts.
type fixtures struct {
	TS        float64  `json:"ts"`
	BlockSize int      `json:"block_size"`
	Tokens    []int32  `json:"tokens"`
	Hashes    []string `json:"hashes"`
	Array     string   `json:"array"`
	ArrayInt  string   `json:"array_int_hashes"`
	Map       string   `json:"map"`
}

// fixtureBatch is the batch the script encodes: two BlockStored events of
// one chain (the second names the first's last block as its parent), a
// BlockRemoved and an AllBlocksCleared.
func fixtureBatch(t *testing.T) (fixtures, Batch) {
	t.Helper()
	b, err := os.ReadFile("testdata/vllm_events.json")
	require.NoError(t, err)
	var f fixtures
	require.NoError(t, json.Unmarshal(b, &f))
	hs := BlockHashes(f.Tokens, f.BlockSize, "")
	require.Len(t, hs, 3)
	for i, h := range hs {
		require.Equal(t, f.Hashes[i], h.String(), "the fixture's hashes are vLLM's")
	}
	return f, Batch{TS: f.TS, Events: []Event{
		{Type: BlockStored, BlockHashes: hs[:2], TokenIDs: f.Tokens[:8], BlockSize: f.BlockSize},
		{Type: BlockStored, BlockHashes: hs[2:], ParentBlockHash: &hs[1], TokenIDs: f.Tokens[8:], BlockSize: f.BlockSize},
		{Type: BlockRemoved, BlockHashes: []Hash{hs[0], hs[2]}},
		{Type: AllBlocksCleared},
	}}
}

// TestEncodeVLLMMatchesFixtures compares the payload byte for byte with the
// three layouts: positional events with byte hashes, with integer hashes,
// and map events.
func TestEncodeVLLMMatchesFixtures(t *testing.T) {
	f, batch := fixtureBatch(t)
	for _, c := range []struct {
		name string
		enc  Encoding
		want string
	}{
		{"array", Encoding{}, f.Array},
		{"array, int hashes", Encoding{IntHashes: true}, f.ArrayInt},
		{"map", Encoding{MapEvents: true}, f.Map},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := EncodeVLLM(batch, c.enc)
			require.NoError(t, err)
			assert.Equal(t, c.want, hex.EncodeToString(got))

			back, err := DecodeVLLM(got)
			require.NoError(t, err)
			want := batch
			if c.enc.IntHashes { // only the low 64 bits travel
				want = truncated(batch)
			}
			if diff := cmp.Diff(want, back); diff != "" {
				t.Errorf("round trip (-sent +decoded):\n%s", diff)
			}
		})
	}
}

func truncated(b Batch) Batch {
	cut := func(h Hash) Hash {
		var o Hash
		copy(o[24:], h[24:])
		return o
	}
	out := Batch{TS: b.TS}
	for _, ev := range b.Events {
		c := ev
		c.BlockHashes = nil
		for _, h := range ev.BlockHashes {
			c.BlockHashes = append(c.BlockHashes, cut(h))
		}
		if ev.ParentBlockHash != nil {
			p := cut(*ev.ParentBlockHash)
			c.ParentBlockHash = &p
		}
		out.Events = append(out.Events, c)
	}
	return out
}

// The structs llm-d's KV-event pool decodes a payload into (its
// pkg/kvcache/kvevents), rewritten from its documented layout: msgpack
// array structs, whose decoder refuses an array with more or fewer
// elements than the struct has fields. Their package cannot be imported
// here (it needs cgo for libzmq), so the test decodes our payload the way
// it does: the batch, then each event's tag, then the rest of the event
// into the tag's struct.
type llmdBatch struct {
	_      struct{} `msgpack:",array"`
	TS     float64
	Events []msgpack.RawMessage
	Rank   *int `msgpack:",omitempty"`
}

type llmdStored struct {
	_           struct{} `msgpack:",array"`
	BlockHashes []any
	Parent      any
	TokenIDs    []uint32
	BlockSize   int
	LoraID      *int    `msgpack:",omitempty"`
	Medium      *string `msgpack:",omitempty"`
}

type llmdRemoved struct {
	_           struct{} `msgpack:",array"`
	BlockHashes []any
	Medium      *string `msgpack:",omitempty"`
}

func TestLLMDSchemaDecodesOurPayload(t *testing.T) {
	f, batch := fixtureBatch(t)
	payload, err := EncodeVLLM(batch, Encoding{})
	require.NoError(t, err)
	var b llmdBatch
	require.NoError(t, msgpack.Unmarshal(payload, &b))
	assert.InDelta(t, f.TS, b.TS, 0)
	require.Len(t, b.Events, 4)
	tags := []string{}
	for _, raw := range b.Events {
		var parts []msgpack.RawMessage
		require.NoError(t, msgpack.Unmarshal(raw, &parts))
		var tag string
		require.NoError(t, msgpack.Unmarshal(parts[0], &tag))
		tags = append(tags, tag)
		rest, err := msgpack.Marshal(parts[1:])
		require.NoError(t, err)
		switch tag {
		case BlockStored:
			var s llmdStored
			require.NoError(t, msgpack.Unmarshal(rest, &s), "llm-d's BlockStored layout")
			require.NotNil(t, s.Medium)
			assert.Equal(t, Medium, *s.Medium)
			assert.Equal(t, f.BlockSize, s.BlockSize)
			for _, h := range s.BlockHashes {
				assert.Len(t, h, 32, "byte hashes; llm-d keys on their last 8 bytes")
			}
		case BlockRemoved:
			var r llmdRemoved
			require.NoError(t, msgpack.Unmarshal(rest, &r), "llm-d's BlockRemoved layout")
			assert.Len(t, r.BlockHashes, 2)
		}
	}
	assert.Equal(t, []string{BlockStored, BlockStored, BlockRemoved, AllBlocksCleared}, tags)
}

// TestPublisherFrames connects a Publisher to a SUB socket bound on
// loopback (the way llm-d's indexer listens and vLLM replicas connect) and
// checks the three frames of what arrives.
func TestPublisherFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	require.NoError(t, sub.Listen("tcp://127.0.0.1:0"))
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))

	pub, err := NewPublisher("tcp://"+sub.Addr().String(), "kv@replica-0@model", Encoding{})
	require.NoError(t, err)
	defer pub.Close()

	_, batch := fixtureBatch(t)
	// PUB drops what it sends before the subscription reaches it, so keep
	// publishing until the first batch arrives.
	got := make(chan zmq4.Msg, 1)
	go func() {
		m, err := sub.Recv()
		if err == nil {
			got <- m
		}
	}()
	var msg zmq4.Msg
	sent := 0
wait:
	for {
		require.NoError(t, pub.Publish(batch))
		sent++
		select {
		case msg = <-got:
			break wait
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no batch arrived")
		}
	}
	require.Len(t, msg.Frames, 3, "topic, sequence, payload")
	assert.Equal(t, "kv@replica-0@model", string(msg.Frames[0]))
	require.Len(t, msg.Frames[1], 8)
	seq := binary.BigEndian.Uint64(msg.Frames[1])
	assert.Less(t, seq, uint64(sent), "sequence numbers count from 0")
	back, err := DecodeVLLM(msg.Frames[2])
	require.NoError(t, err)
	assert.Equal(t, batch, back)

	// The next message carries the next number.
	require.NoError(t, pub.Publish(batch))
	next, err := sub.Recv()
	require.NoError(t, err)
	assert.Equal(t, seq+1, binary.BigEndian.Uint64(next.Frames[1]))
}

func TestPublisherRefusesUnknownEndpoint(t *testing.T) {
	_, err := NewPublisher("udp://127.0.0.1:1", "", Encoding{})
	assert.ErrorContains(t, err, "want tcp://")
}
