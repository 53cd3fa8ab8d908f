package kveventstest

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// A model of how llm-d's KV-cache indexer reads vLLM's events, written for
// these tests from llm-d's decoder (the vLLM adapter of its
// pkg/kvevents/engineadapter; docs/kv_events.md names the commits). Its
// package cannot serve as a test dependency here, so the rules are restated:
//
//   - the batch is decoded into a msgpack array struct of three fields (ts,
//     events, data_parallel_rank), which vmihailenco/msgpack accepts only
//     from an array of exactly three elements;
//   - each event is decoded generically: an array is used as it is; a map
//     (from llm-d 0.9 on) is put back in vLLM's positional order by field
//     name, the tag from "type"; anything else is an error;
//   - BlockStored needs at least 5 positions (tag, block_hashes,
//     parent_block_hash, token_ids, block_size), BlockRemoved at least 2;
//     positions past those are optional and extra ones ignored;
//   - a hash is a uint64: an integer as it is, bytes by their last 8 bytes
//     big-endian; a nil parent is 0.
//
// LLMDVersions covers the releases before that decoder: up to 0.4 (a
// BlockStored array of exactly 7 elements) and 0.5–0.6 (exactly 8), which
// decoded each event, less its tag, into a msgpack array struct.

// LLMDEvent is one decoded event.
type LLMDEvent struct {
	Type        string
	BlockHashes []uint64
	Parent      uint64 // 0: none
	Tokens      []uint32
	BlockSize   int
	Medium      string
}

// LLMDBatch is one decoded batch.
type LLMDBatch struct {
	TS     float64
	Events []LLMDEvent
}

// LLMDVersion is one llm-d decoder.
type LLMDVersion struct {
	Name   string
	Decode func(payload []byte) (LLMDBatch, error)
}

// LLMDVersions are llm-d's decoders, oldest first.
var LLMDVersions = []LLMDVersion{
	{"llm-d ≤0.4", func(p []byte) (LLMDBatch, error) { return decodeFixed(p, 6) }},
	{"llm-d 0.5–0.6", func(p []byte) (LLMDBatch, error) { return decodeFixed(p, 7) }},
	{"llm-d 0.7–0.8", func(p []byte) (LLMDBatch, error) { return decodeGeneric(p, false) }},
	{"llm-d 0.9+", DecodeLLMD},
}

// DecodeLLMD decodes payload as llm-d's current decoder does.
func DecodeLLMD(payload []byte) (LLMDBatch, error) { return decodeGeneric(payload, true) }

type llmdRawBatch struct {
	_      struct{} `msgpack:",array"`
	TS     float64
	Events []msgpack.RawMessage
	Rank   *int `msgpack:",omitempty"`
}

var (
	storedOrder  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}
	removedOrder = []string{"block_hashes", "medium", "group_idx"}
)

func decodeGeneric(payload []byte, maps bool) (LLMDBatch, error) {
	var raw llmdRawBatch
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return LLMDBatch{}, fmt.Errorf("batch: %w", err)
	}
	out := LLMDBatch{TS: raw.TS}
	for i, re := range raw.Events {
		var v any
		if err := msgpack.Unmarshal(re, &v); err != nil {
			return out, fmt.Errorf("event %d: %w", i, err)
		}
		var fields []any
		switch e := v.(type) {
		case []any:
			fields = e
		case map[string]any:
			if !maps {
				return out, fmt.Errorf("event %d: a map, and this version reads arrays only", i)
			}
			tag, ok := e["type"].(string)
			if !ok {
				return out, fmt.Errorf("event %d: a map without a string type", i)
			}
			fields = []any{tag}
			order := map[string][]string{"BlockStored": storedOrder, "BlockRemoved": removedOrder}[tag]
			for _, name := range order {
				fields = append(fields, e[name])
			}
		default:
			return out, fmt.Errorf("event %d: neither an array nor a map: %T", i, v)
		}
		ev, err := fromFields(fields)
		if err != nil {
			return out, fmt.Errorf("event %d: %w", i, err)
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

func at(f []any, i int) any {
	if i < len(f) {
		return f[i]
	}
	return nil
}

func fromFields(f []any) (LLMDEvent, error) {
	if len(f) == 0 {
		return LLMDEvent{}, fmt.Errorf("no tag")
	}
	tag, ok := f[0].(string)
	if !ok {
		return LLMDEvent{}, fmt.Errorf("the tag is %T", f[0])
	}
	ev := LLMDEvent{Type: tag}
	var err error
	switch tag {
	case "BlockStored":
		if len(f) < 5 {
			return ev, fmt.Errorf("BlockStored: need at least 5 fields, got %d", len(f))
		}
		if ev.BlockHashes, err = hashList(f[1]); err != nil {
			return ev, err
		}
		if f[2] != nil {
			if ev.Parent, err = hashOf(f[2]); err != nil {
				return ev, err
			}
		}
		toks, ok := f[3].([]any)
		if !ok {
			return ev, fmt.Errorf("token_ids is %T", f[3])
		}
		for _, t := range toks {
			n, ok := integer(t)
			if !ok {
				return ev, fmt.Errorf("token id %v", t)
			}
			ev.Tokens = append(ev.Tokens, uint32(n))
		}
		n, ok := integer(f[4])
		if !ok {
			return ev, fmt.Errorf("block_size is %T", f[4])
		}
		ev.BlockSize = int(n)
		if m := at(f, 6); m != nil {
			if ev.Medium, ok = m.(string); !ok {
				return ev, fmt.Errorf("medium is %T", m)
			}
		}
	case "BlockRemoved":
		if len(f) < 2 {
			return ev, fmt.Errorf("BlockRemoved: need at least 2 fields, got %d", len(f))
		}
		if ev.BlockHashes, err = hashList(f[1]); err != nil {
			return ev, err
		}
		if m := at(f, 2); m != nil {
			if ev.Medium, ok = m.(string); !ok {
				return ev, fmt.Errorf("medium is %T", m)
			}
		}
	case "AllBlocksCleared":
	default:
		return ev, fmt.Errorf("unknown tag %q", tag)
	}
	return ev, nil
}

// The pre-0.7 decoders: the event's tag, then the rest re-encoded and
// decoded into an array struct, which must have exactly as many elements.
type (
	storedV4 struct {
		_           struct{} `msgpack:",array"`
		BlockHashes []any
		Parent      any
		TokenIDs    []uint32
		BlockSize   int
		LoraID      *int    `msgpack:",omitempty"`
		Medium      *string `msgpack:",omitempty"`
	}
	storedV5 struct {
		_           struct{} `msgpack:",array"`
		BlockHashes []any
		Parent      any
		TokenIDs    []uint32
		BlockSize   int
		LoraID      *int    `msgpack:",omitempty"`
		Medium      *string `msgpack:",omitempty"`
		LoraName    *string `msgpack:",omitempty"`
	}
	removedV4 struct {
		_           struct{} `msgpack:",array"`
		BlockHashes []any
		Medium      *string `msgpack:",omitempty"`
	}
	clearedV4 struct {
		_ struct{} `msgpack:",array"`
	}
)

func decodeFixed(payload []byte, storedFields int) (LLMDBatch, error) {
	var raw llmdRawBatch
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return LLMDBatch{}, fmt.Errorf("batch: %w", err)
	}
	out := LLMDBatch{TS: raw.TS}
	for i, re := range raw.Events {
		var parts []msgpack.RawMessage
		if err := msgpack.Unmarshal(re, &parts); err != nil {
			return out, fmt.Errorf("event %d: %w", i, err)
		}
		if len(parts) == 0 {
			return out, fmt.Errorf("event %d: no tag", i)
		}
		var tag string
		if err := msgpack.Unmarshal(parts[0], &tag); err != nil {
			return out, fmt.Errorf("event %d: tag: %w", i, err)
		}
		rest, err := msgpack.Marshal(parts[1:])
		if err != nil {
			return out, err
		}
		ev := LLMDEvent{Type: tag}
		switch tag {
		case "BlockStored":
			var hs []any
			var parent any
			var toks []uint32
			var bs int
			var medium *string
			if storedFields == 6 {
				var s storedV4
				err = msgpack.Unmarshal(rest, &s)
				hs, parent, toks, bs, medium = s.BlockHashes, s.Parent, s.TokenIDs, s.BlockSize, s.Medium
			} else {
				var s storedV5
				err = msgpack.Unmarshal(rest, &s)
				hs, parent, toks, bs, medium = s.BlockHashes, s.Parent, s.TokenIDs, s.BlockSize, s.Medium
			}
			if err != nil {
				return out, fmt.Errorf("event %d: BlockStored: %w", i, err)
			}
			if ev.BlockHashes, err = hashList(hs); err != nil {
				return out, err
			}
			if parent != nil {
				if ev.Parent, err = hashOf(parent); err != nil {
					return out, err
				}
			}
			ev.Tokens, ev.BlockSize = toks, bs
			if medium != nil {
				ev.Medium = *medium
			}
		case "BlockRemoved":
			var r removedV4
			if err := msgpack.Unmarshal(rest, &r); err != nil {
				return out, fmt.Errorf("event %d: BlockRemoved: %w", i, err)
			}
			if ev.BlockHashes, err = hashList(r.BlockHashes); err != nil {
				return out, err
			}
		case "AllBlocksCleared":
			var c clearedV4
			if err := msgpack.Unmarshal(rest, &c); err != nil {
				return out, fmt.Errorf("event %d: AllBlocksCleared: %w", i, err)
			}
		default:
			return out, fmt.Errorf("event %d: unknown tag %q", i, tag)
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

func hashList(v any) ([]uint64, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("block_hashes is %T", v)
	}
	out := make([]uint64, 0, len(l))
	for _, x := range l {
		h, err := hashOf(x)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func hashOf(v any) (uint64, error) {
	if b, ok := v.([]byte); ok {
		if len(b) == 0 {
			return 0, fmt.Errorf("an empty hash")
		}
		var last [8]byte
		copy(last[8-min(8, len(b)):], b[max(0, len(b)-8):])
		return binary.BigEndian.Uint64(last[:]), nil
	}
	if n, ok := integer(v); ok {
		return uint64(n), nil
	}
	return 0, fmt.Errorf("a hash is bytes or an integer, have %T", v)
}

func integer(v any) (int64, bool) {
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

// LLMDIndex applies batches the way llm-d's event pool does for one pod,
// and keeps the engine hashes it indexed. llm-d keys a block by a key of its
// own, computed from the block's tokens and its parent's key, so it indexes
// a BlockStored only when the event carries whole blocks of token ids and
// names a parent it has indexed (or none); otherwise it drops the event.
// Dropped counts those.
type LLMDIndex struct {
	BlockSize int             // the indexer's block size (llm-d's must match the engine's here)
	Held      map[uint64]bool // engine hashes indexed
	Dropped   []string        // why events were dropped, in order
}

// NewLLMDIndex returns an empty index for blocks of blockSize tokens.
func NewLLMDIndex(blockSize int) *LLMDIndex {
	return &LLMDIndex{BlockSize: blockSize, Held: map[uint64]bool{}}
}

// Apply adds one decoded batch.
func (x *LLMDIndex) Apply(b LLMDBatch) {
	for _, ev := range b.Events {
		switch ev.Type {
		case "AllBlocksCleared":
			x.Held = map[uint64]bool{}
		case "BlockRemoved":
			for _, h := range ev.BlockHashes {
				delete(x.Held, h)
			}
		case "BlockStored":
			if ev.Parent != 0 && !x.Held[ev.Parent] {
				x.Dropped = append(x.Dropped, fmt.Sprintf("parent %x unknown", ev.Parent))
				continue
			}
			if len(ev.Tokens) != x.BlockSize*len(ev.BlockHashes) || ev.BlockSize != x.BlockSize {
				x.Dropped = append(x.Dropped, fmt.Sprintf("%d tokens for %d blocks of %d", len(ev.Tokens), len(ev.BlockHashes), ev.BlockSize))
				continue
			}
			for _, h := range ev.BlockHashes {
				x.Held[h] = true
			}
		}
	}
}

// String lists what the index dropped, for failure messages.
func (x *LLMDIndex) String() string {
	return fmt.Sprintf("%d held, dropped: %s", len(x.Held), strings.Join(x.Dropped, "; "))
}
