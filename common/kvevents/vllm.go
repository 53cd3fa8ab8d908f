package kvevents

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Medium is what the events name as the tier a block lives in when an
// Event leaves its Medium empty: vLLM's MEDIUM_GPU, the engine's primary KV
// cache, whichever device backs it here. The cache tiers under the pool
// name theirs as vLLM's offloading does ("CPU"; "DISK").
const Medium = "GPU"

// MediumOf is ev's medium: its own, or Medium.
func MediumOf(ev Event) string {
	if ev.Medium == "" {
		return Medium
	}
	return ev.Medium
}

// vLLM's schema (vllm/distributed/kv_events.py; docs/kv_events.md has the
// table and the commit it was read at). Every struct is a msgspec Struct
// with omit_defaults and tag=True (the tag is the class name), fields in
// this order; "required" means the field has no default, so vLLM's decoder
// refuses an event without it, even when its value is None:
//
//	BlockStored:  block_hashes, parent_block_hash, token_ids, block_size,
//	              lora_id, medium, lora_name              (required)
//	              extra_keys, group_idx, kv_cache_spec_kind,
//	              kv_cache_spec_sliding_window            (default None)
//	BlockRemoved: block_hashes, medium (required); group_idx (default None)
//	AllBlocksCleared: no fields
//	EventBatch:   ts, events (required); data_parallel_rank (default None,
//	              set to the publisher's rank before encoding)
//
// With array_like, msgspec writes a struct as an array, the tag first, and
// omit_defaults leaves out only trailing fields equal to their default;
// without it, as a map in declaration order with the tag under "type",
// leaving out every field equal to its default. Our events have nothing to
// put in the defaulted fields, so both layouts end at lora_name.

// Encoding chooses how EncodeVLLM lays out a batch. Both write the batch
// itself positionally, [ts, events, data_parallel_rank]; they differ in the
// events.
type Encoding struct {
	// MapEvents writes each event as a map keyed by field name with the tag
	// under "type" (vLLM since its PR #42892 dropped array_like from the
	// event structs). Off, each event is a positional array with the tag
	// first: the layout of earlier vLLM releases, and the one llm-d reads
	// from 0.5 on (maps only from 0.9 on; docs/kv_events.md has the table).
	MapEvents bool
	// IntHashes writes each block hash as vLLM does under
	// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: the uint64 Hash.Uint64. Off, the
	// 32 bytes themselves (vLLM's default).
	IntHashes bool
	// HashAlgo is the algorithm the hashes were made with: a byte hash is
	// sent as vLLM sends it under that algorithm, 32 bytes for the SHA-256
	// ones, 16 for the xxhash ones (Hash.Bytes).
	HashAlgo HashAlgo
	// LoRAName is the lora_name every BlockStored carries: the adapter the
	// blocks were computed with (serve's -lora-name), "" for none (null).
	LoRAName string
}

// EncodeVLLM returns b as the msgpack payload vLLM's ZeroMQ publisher sends
// (the third frame of each message).
func EncodeVLLM(b Batch, enc Encoding) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	w := vllmWriter{e: e, enc: enc}
	w.arr(3)
	w.check(e.EncodeFloat64(b.TS))
	w.arr(len(b.Events))
	for _, ev := range b.Events {
		w.event(ev)
	}
	w.check(e.EncodeUint(0)) // data_parallel_rank: one engine, rank 0
	return buf.Bytes(), w.err
}

// vllmWriter keeps the first encoding error so the layout reads straight.
type vllmWriter struct {
	e   *msgpack.Encoder
	enc Encoding
	err error
}

func (w *vllmWriter) check(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *vllmWriter) arr(n int)    { w.check(w.e.EncodeArrayLen(n)) }
func (w *vllmWriter) str(s string) { w.check(w.e.EncodeString(s)) }
func (w *vllmWriter) null()        { w.check(w.e.EncodeNil()) }

// field starts one field: its name in a map event, nothing in an array.
func (w *vllmWriter) field(name string) {
	if w.enc.MapEvents {
		w.str(name)
	}
}

func (w *vllmWriter) hash(h Hash) {
	if w.enc.IntHashes {
		w.check(w.e.EncodeUint(h.Uint64()))
		return
	}
	w.check(w.e.EncodeBytes(h.Bytes(w.enc.HashAlgo)))
}

func (w *vllmWriter) hashes(hs []Hash) {
	w.arr(len(hs))
	for _, h := range hs {
		w.hash(h)
	}
}

func (w *vllmWriter) event(ev Event) {
	// Fields in vLLM's order up to its last required one; the defaulted
	// ones after it are None here, which omit_defaults leaves out in both
	// layouts.
	var n int
	switch ev.Type {
	case BlockStored:
		n = 8 // tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name
	case BlockRemoved:
		n = 3 // tag, block_hashes, medium
	case AllBlocksCleared:
		n = 1
	default:
		w.check(fmt.Errorf("kvevents: unknown event type %q", ev.Type))
		return
	}
	if w.enc.MapEvents {
		w.check(w.e.EncodeMapLen(n))
		w.str("type")
	} else {
		w.arr(n)
	}
	w.str(ev.Type)
	switch ev.Type {
	case BlockStored:
		w.field("block_hashes")
		w.hashes(ev.BlockHashes)
		w.field("parent_block_hash")
		if ev.ParentBlockHash == nil {
			w.null()
		} else {
			w.hash(*ev.ParentBlockHash)
		}
		w.field("token_ids")
		w.arr(len(ev.TokenIDs))
		for _, t := range ev.TokenIDs {
			w.check(w.e.EncodeInt(int64(t)))
		}
		w.field("block_size")
		w.check(w.e.EncodeInt(int64(ev.BlockSize)))
		w.field("lora_id")
		w.null()
		w.field("medium")
		w.str(MediumOf(ev))
		w.field("lora_name")
		if w.enc.LoRAName == "" {
			w.null()
		} else {
			w.str(w.enc.LoRAName)
		}
	case BlockRemoved:
		w.field("block_hashes")
		w.hashes(ev.BlockHashes)
		w.field("medium")
		w.str(MediumOf(ev))
	}
}

// DecodeVLLM reads a payload in either of vLLM's layouts (positional or
// map events, byte or integer hashes) back into a Batch. An integer hash
// becomes a Hash whose last eight bytes hold it (its first 24 are zero), so
// Hash.Uint64 returns what was sent. The medium is read (GPU as "",
// as events made here leave it); fields this package does not model
// (lora_id, lora_name, extra keys, group_idx, …) are skipped.
func DecodeVLLM(payload []byte) (Batch, error) {
	var raw any
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return Batch{}, fmt.Errorf("kvevents: payload is not msgpack: %w", err)
	}
	var ts any
	var events []any
	switch r := raw.(type) {
	case []any:
		if len(r) < 2 {
			return Batch{}, fmt.Errorf("kvevents: a batch has at least ts and events, have %d fields", len(r))
		}
		ts, events, _ = r[0], asList(r[1]), true
	case map[string]any:
		ts, events = r["ts"], asList(r["events"])
	default:
		return Batch{}, fmt.Errorf("kvevents: a batch is an array or a map, have %T", raw)
	}
	var b Batch
	switch v := ts.(type) {
	case float64:
		b.TS = v
	case float32:
		b.TS = float64(v)
	default:
		return Batch{}, fmt.Errorf("kvevents: ts is %T, not a float", ts)
	}
	for i, raw := range events {
		ev, err := decodeEvent(raw)
		if err != nil {
			return Batch{}, fmt.Errorf("kvevents: event %d: %w", i, err)
		}
		b.Events = append(b.Events, ev)
	}
	return b, nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// decodeEvent maps either layout onto named fields.
func decodeEvent(raw any) (Event, error) {
	f := map[string]any{}
	switch r := raw.(type) {
	case map[string]any:
		f = r
	case []any:
		if len(r) == 0 {
			return Event{}, fmt.Errorf("an empty event has no tag")
		}
		f["type"] = r[0]
		var names []string
		switch r[0] {
		case BlockStored:
			names = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"}
		case BlockRemoved:
			names = []string{"block_hashes", "medium"}
		}
		for i, n := range names {
			if i+1 < len(r) {
				f[n] = r[i+1]
			}
		}
	default:
		return Event{}, fmt.Errorf("an event is an array or a map, have %T", raw)
	}
	ev := Event{}
	ev.Type, _ = f["type"].(string)
	if m, _ := f["medium"].(string); m != Medium {
		ev.Medium = m // the primary cache's stays "", as events made here leave it
	}
	var err error
	switch ev.Type {
	case BlockStored:
		if ev.BlockHashes, err = decodeHashes(f["block_hashes"]); err != nil {
			return ev, err
		}
		if p := f["parent_block_hash"]; p != nil {
			h, err := decodeHash(p)
			if err != nil {
				return ev, err
			}
			ev.ParentBlockHash = &h
		}
		for _, t := range asList(f["token_ids"]) {
			n, ok := asInt(t)
			if !ok {
				return ev, fmt.Errorf("token id %v is not an integer", t)
			}
			ev.TokenIDs = append(ev.TokenIDs, int32(n))
		}
		n, ok := asInt(f["block_size"])
		if !ok {
			return ev, fmt.Errorf("block_size %v is not an integer", f["block_size"])
		}
		ev.BlockSize = int(n)
	case BlockRemoved:
		ev.BlockHashes, err = decodeHashes(f["block_hashes"])
	case AllBlocksCleared:
	default:
		return ev, fmt.Errorf("unknown event type %v", f["type"])
	}
	return ev, err
}

func decodeHashes(v any) ([]Hash, error) {
	var out []Hash
	for _, x := range asList(v) {
		h, err := decodeHash(x)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func decodeHash(v any) (Hash, error) {
	var h Hash
	if b, ok := v.([]byte); ok {
		// 32 bytes (SHA-256) or 16 (xxh3-128), kept in the last bytes as
		// the hasher keeps them.
		if len(b) != len(h) && len(b) != 16 {
			return h, fmt.Errorf("a block hash has 32 bytes (sha256, sha256_cbor) or 16 (xxhash, xxhash_cbor), have %d", len(b))
		}
		copy(h[len(h)-len(b):], b)
		return h, nil
	}
	n, ok := asInt(v)
	if !ok {
		return h, fmt.Errorf("a block hash is bytes or an integer, have %T", v)
	}
	for i := range 8 {
		h[31-i] = byte(uint64(n) >> (8 * i))
	}
	return h, nil
}

// asInt accepts every integer type the msgpack decoder may produce.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	}
	return 0, false
}
