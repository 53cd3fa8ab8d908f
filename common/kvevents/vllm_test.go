package kvevents

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"kvlab/common/kvevents/kveventstest"
)

// schemaFixtures is testdata/vllm_events_schema.json, written by
// scripts/vllm_kv_events.py: batches encoded with python3-msgpack from
// vLLM's event schema under msgspec's encoding rules.
type schemaFixtures struct {
	TS        float64           `json:"ts"`
	BlockSize int               `json:"block_size"`
	Tokens    []int32           `json:"tokens"`
	Hashes    []string          `json:"hashes"`
	Payloads  map[string]string `json:"payloads"`
}

func loadSchemaFixtures(t *testing.T) (schemaFixtures, []Hash) {
	t.Helper()
	b, err := os.ReadFile("testdata/vllm_events_schema.json")
	require.NoError(t, err)
	var f schemaFixtures
	require.NoError(t, json.Unmarshal(b, &f))
	hs := BlockHashes(f.Tokens, f.BlockSize, "")
	require.Len(t, hs, 3)
	for i, h := range hs {
		require.Equal(t, f.Hashes[i], h.String(), "the fixture's hashes are vLLM's")
	}
	return f, hs
}

func (f schemaFixtures) payload(t *testing.T, name string) []byte {
	t.Helper()
	p, err := hex.DecodeString(f.Payloads[name])
	require.NoError(t, err)
	require.NotEmpty(t, p, name)
	return p
}

// fixtureBatch is the batch the script encodes as ours: two BlockStored
// events of one chain (the second names the first's last block as its
// parent), a BlockRemoved and an AllBlocksCleared.
func fixtureBatch(t *testing.T) (schemaFixtures, Batch) {
	f, hs := loadSchemaFixtures(t)
	return f, Batch{TS: f.TS, Events: []Event{
		{Type: BlockStored, BlockHashes: hs[:2], TokenIDs: f.Tokens[:8], BlockSize: f.BlockSize},
		{Type: BlockStored, BlockHashes: hs[2:], ParentBlockHash: &hs[1], TokenIDs: f.Tokens[8:], BlockSize: f.BlockSize},
		{Type: BlockRemoved, BlockHashes: []Hash{hs[0], hs[2]}},
		{Type: AllBlocksCleared},
	}}
}

var layouts = []struct {
	name string
	enc  Encoding
}{
	{"array", Encoding{}},
	{"array_int_hashes", Encoding{IntHashes: true}},
	{"map", Encoding{MapEvents: true}},
	{"map_int_hashes", Encoding{MapEvents: true, IntHashes: true}},
}

// TestEncodeVLLMMatchesSchemaFixtures compares our payload byte for byte
// with vLLM's encoding of the same batch, in both event layouts with byte
// and integer hashes, and reads each back with DecodeVLLM.
func TestEncodeVLLMMatchesSchemaFixtures(t *testing.T) {
	f, batch := fixtureBatch(t)
	for _, c := range layouts {
		t.Run(c.name, func(t *testing.T) {
			want := f.payload(t, c.name)
			got, err := EncodeVLLM(batch, c.enc)
			require.NoError(t, err)
			assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))

			back, err := DecodeVLLM(want)
			require.NoError(t, err)
			exp := batch
			if c.enc.IntHashes { // only the low 64 bits travel
				exp = truncated(batch)
			}
			if diff := cmp.Diff(exp, back); diff != "" {
				t.Errorf("decoding vLLM's bytes (-sent +decoded):\n%s", diff)
			}
		})
	}
}

// TestBlockStoredCarriesVLLMsRequiredFields: vLLM's BlockStored has seven
// fields without a default (up to lora_name), so a positional event needs
// eight elements with its tag; ours has exactly those, the defaulted ones
// left out as omit_defaults leaves them out.
func TestBlockStoredCarriesVLLMsRequiredFields(t *testing.T) {
	_, batch := fixtureBatch(t)
	for _, c := range layouts {
		payload, err := EncodeVLLM(batch, c.enc)
		require.NoError(t, err)
		var raw []any
		require.NoError(t, msgpack.Unmarshal(payload, &raw))
		require.Len(t, raw, 3, "[ts, events, data_parallel_rank]")
		assert.EqualValues(t, 0, raw[2], "data parallel rank 0")
		ev := raw[1].([]any)[0]
		if c.enc.MapEvents {
			assert.Len(t, ev, 8, c.name)
			assert.Contains(t, ev, "lora_name", c.name)
			assert.NotContains(t, ev, "extra_keys", c.name)
		} else {
			assert.Len(t, ev, 8, c.name)
			assert.Nil(t, ev.([]any)[7], "lora_name")
		}
		assert.NoError(t, kveventstest.CheckVLLM(payload, c.enc.MapEvents), "vLLM's decoder, %s", c.name)
		assert.Error(t, kveventstest.CheckVLLM(payload, !c.enc.MapEvents), "the other layout's decoder refuses %s", c.name)
	}
}

// TestCheckVLLMRefusesTheOldSevenElementEvent keeps the decoder model
// honest: the positional BlockStored we used to send, without lora_name,
// is what vLLM's decoder refuses.
func TestCheckVLLMRefusesTheOldSevenElementEvent(t *testing.T) {
	old, err := msgpack.Marshal([]any{1.5, []any{[]any{"BlockStored", []any{[]byte{1}}, nil, []any{1, 2}, 2, nil, "GPU"}}, 0})
	require.NoError(t, err)
	assert.ErrorContains(t, kveventstest.CheckVLLM(old, false), `missing required field "lora_name"`)
}

// TestDecodeVLLMReadsAFullVLLMBatch decodes what a current vLLM sends when
// it fills the defaulted fields (extra_keys with a salt, group_idx,
// kv_cache_spec_kind): positional events of 11 elements and map events
// with integer hashes. DecodeVLLM keeps the fields it models.
func TestDecodeVLLMReadsAFullVLLMBatch(t *testing.T) {
	f, hs := loadSchemaFixtures(t)
	for _, name := range []string{"vllm_full_array", "vllm_full_map"} {
		p := f.payload(t, name)
		require.NoError(t, kveventstest.CheckVLLM(p, name == "vllm_full_map"), name)
		b, err := DecodeVLLM(p)
		require.NoError(t, err, name)
		require.Len(t, b.Events, 2, name)
		want := Batch{TS: f.TS, Events: []Event{
			{Type: BlockStored, BlockHashes: hs, TokenIDs: f.Tokens, BlockSize: f.BlockSize},
			{Type: BlockRemoved, BlockHashes: hs[2:]},
		}}
		if name == "vllm_full_map" {
			want = truncated(want)
		}
		assert.Equal(t, want, b, name)
		if name == "vllm_full_array" {
			var raw []any
			require.NoError(t, msgpack.Unmarshal(p, &raw))
			assert.Len(t, raw[1].([]any)[0], 11, "positions up to kv_cache_spec_kind")
		}
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

// TestLLMDDecodesOurPayload decodes our payloads with the model of llm-d's
// decoders (kveventstest.LLMDVersions): the current one reads both layouts
// and keys each block by the last 8 bytes of its hash; 0.7–0.8 read only
// positional events; 0.5–0.6 wanted exactly vLLM's eight positions, which
// is what we send; 0.4 and before wanted seven and refuse it.
func TestLLMDDecodesOurPayload(t *testing.T) {
	f, batch := fixtureBatch(t)
	want := kveventstest.LLMDBatch{TS: f.TS}
	for _, ev := range batch.Events {
		le := kveventstest.LLMDEvent{Type: ev.Type}
		for _, h := range ev.BlockHashes {
			le.BlockHashes = append(le.BlockHashes, h.Uint64())
		}
		if ev.ParentBlockHash != nil {
			le.Parent = ev.ParentBlockHash.Uint64()
		}
		for _, t := range ev.TokenIDs {
			le.Tokens = append(le.Tokens, uint32(t))
		}
		le.BlockSize = ev.BlockSize
		if ev.Type != AllBlocksCleared {
			le.Medium = Medium
		}
		want.Events = append(want.Events, le)
	}
	accepts := map[string][]bool{ // per version: array, map
		"llm-d ≤0.4":    {false, false},
		"llm-d 0.5–0.6": {true, false},
		"llm-d 0.7–0.8": {true, false},
		"llm-d 0.9+":    {true, true},
	}
	for _, v := range kveventstest.LLMDVersions {
		for i, c := range layouts {
			payload, err := EncodeVLLM(batch, c.enc)
			require.NoError(t, err)
			got, err := v.Decode(payload)
			if !accepts[v.Name][i/2] {
				assert.Error(t, err, "%s reads %s", v.Name, c.name)
				continue
			}
			require.NoError(t, err, "%s reads %s", v.Name, c.name)
			if v.Name == "llm-d 0.5–0.6" { // medium is read, then not compared: it kept only the tier
				for j := range got.Events {
					got.Events[j].Medium = want.Events[j].Medium
				}
			}
			assert.Equal(t, want, got, "%s reads %s", v.Name, c.name)
		}
	}
	// What a current vLLM sends, with every defaulted field filled, the
	// current decoder reads too.
	for _, name := range []string{"vllm_full_array", "vllm_full_map"} {
		got, err := kveventstest.DecodeLLMD(f.payload(t, name))
		require.NoError(t, err, name)
		require.Len(t, got.Events, 2)
		assert.Len(t, got.Events[0].Tokens, 12)
	}
}

// TestByteHashesTakeTheAlgorithmsWidth: vLLM sends a byte hash as its
// algorithm makes it, 16 bytes under xxhash, 32 under SHA-256, and every
// BlockStored names the LoRA adapter; DecodeVLLM reads both widths back.
func TestByteHashesTakeTheAlgorithmsWidth(t *testing.T) {
	for _, algo := range HashAlgos() {
		t.Run(algo.String(), func(t *testing.T) {
			hs := NewHasher(algo, "0", "adapter-1").BlockHashes([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 4, "")
			b := Batch{TS: 1, Events: []Event{{Type: BlockStored, BlockHashes: hs[1:], ParentBlockHash: &hs[0], TokenIDs: []int32{5, 6, 7, 8}, BlockSize: 4}}}
			payload, err := EncodeVLLM(b, Encoding{HashAlgo: algo, LoRAName: "adapter-1"})
			require.NoError(t, err)
			var raw []any
			require.NoError(t, msgpack.Unmarshal(payload, &raw))
			ev := raw[1].([]any)[0].([]any)
			assert.Len(t, ev[1].([]any)[0], algo.Size(), "have %d bytes; want %d", len(ev[1].([]any)[0].([]byte)), algo.Size())
			assert.Equal(t, "adapter-1", ev[7])
			back, err := DecodeVLLM(payload)
			require.NoError(t, err)
			assert.Equal(t, hs[1:], back.Events[0].BlockHashes)
			assert.Equal(t, hs[0], *back.Events[0].ParentBlockHash)
		})
	}
}

// TestMediumTravels: a cache tier's events carry its medium ("CPU") in
// both layouts, where vLLM's offloading puts it, and decode back to it; the
// primary cache's stay "" and are written "GPU".
func TestMediumTravels(t *testing.T) {
	h := Hash{31: 1}
	batch := Batch{TS: 1, Events: []Event{
		{Type: BlockStored, BlockHashes: []Hash{h}, TokenIDs: []int32{1, 2}, BlockSize: 2, Medium: "CPU"},
		{Type: BlockRemoved, BlockHashes: []Hash{h}, Medium: "CPU"},
		{Type: BlockRemoved, BlockHashes: []Hash{h}},
	}}
	for _, c := range layouts {
		payload, err := EncodeVLLM(batch, c.enc)
		require.NoError(t, err)
		require.NoError(t, kveventstest.CheckVLLM(payload, c.enc.MapEvents), c.name)
		got, err := DecodeVLLM(payload)
		require.NoError(t, err)
		assert.Equal(t, []string{"CPU", "CPU", ""}, []string{got.Events[0].Medium, got.Events[1].Medium, got.Events[2].Medium}, c.name)
		assert.Contains(t, string(payload), "GPU", "%s: the primary cache's medium is written", c.name)
	}
}
