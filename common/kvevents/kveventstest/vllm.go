package kveventstest

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// CheckVLLM decodes payload the way a subscriber built on vLLM's own event
// classes does: msgspec decoding a KVEventBatch whose events are a tagged
// union of BlockStored, BlockRemoved and AllBlocksCleared. mapEvents picks
// the event layout the subscriber's classes have: positional (array_like,
// vLLM before its PR #42892) or tagged maps (after it). The rules of
// msgspec restated for the test: a positional struct must carry every field
// that has no default and may stop after any of them; a map must carry
// every field without a default, and unknown keys are ignored; each value
// must have its field's type (None only where the field is optional). The
// schema is the one scripts/vllm_kv_events.py states.
func CheckVLLM(payload []byte, mapEvents bool) error {
	var raw any
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return err
	}
	b, ok := raw.([]any)
	if !ok || len(b) < 2 || len(b) > 3 {
		return fmt.Errorf("the batch is [ts, events, data_parallel_rank?], have %T of %d", raw, lenOf(raw))
	}
	if _, ok := b[0].(float64); !ok {
		return fmt.Errorf("ts is %T, not a float", b[0])
	}
	if len(b) == 3 && b[2] != nil {
		if _, ok := integer(b[2]); !ok {
			return fmt.Errorf("data_parallel_rank is %T", b[2])
		}
	}
	events, ok := b[1].([]any)
	if !ok {
		return fmt.Errorf("events is %T", b[1])
	}
	for i, e := range events {
		if err := checkEvent(e, mapEvents); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

func lenOf(v any) int {
	switch x := v.(type) {
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	}
	return 0
}

type vllmField struct {
	name     string
	required bool
	check    func(any) bool // the value's type, None excluded
	optional bool           // None is allowed
}

var (
	isHashes = func(v any) bool {
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, h := range l {
			if !isHash(h) {
				return false
			}
		}
		return true
	}
	isHash = func(v any) bool {
		if _, ok := v.([]byte); ok {
			return true
		}
		_, ok := integer(v)
		return ok
	}
	isInts = func(v any) bool {
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, t := range l {
			if _, ok := integer(t); !ok {
				return false
			}
		}
		return true
	}
	isInt  = func(v any) bool { _, ok := integer(v); return ok }
	isStr  = func(v any) bool { _, ok := v.(string); return ok }
	isList = func(v any) bool { _, ok := v.([]any); return ok }
)

// vllmSchema: vLLM's event structs, fields in declaration order.
var vllmSchema = map[string][]vllmField{
	"BlockStored": {
		{"block_hashes", true, isHashes, false},
		{"parent_block_hash", true, isHash, true},
		{"token_ids", true, isInts, false},
		{"block_size", true, isInt, false},
		{"lora_id", true, isInt, true},
		{"medium", true, isStr, true},
		{"lora_name", true, isStr, true},
		{"extra_keys", false, isList, true},
		{"group_idx", false, isInt, true},
		{"kv_cache_spec_kind", false, isStr, true},
		{"kv_cache_spec_sliding_window", false, isInt, true},
	},
	"BlockRemoved": {
		{"block_hashes", true, isHashes, false},
		{"medium", true, isStr, true},
		{"group_idx", false, isInt, true},
	},
	"AllBlocksCleared": {},
}

func checkEvent(e any, mapEvents bool) error {
	values := map[string]any{}
	present := map[string]bool{}
	var tag string
	switch x := e.(type) {
	case []any:
		if mapEvents {
			return fmt.Errorf("expected a map, got an array")
		}
		if len(x) == 0 {
			return fmt.Errorf("an empty array has no tag")
		}
		tag, _ = x[0].(string)
		fields, ok := vllmSchema[tag]
		if !ok {
			return fmt.Errorf("invalid tag %v", x[0])
		}
		if len(x)-1 > len(fields) {
			return fmt.Errorf("%s: expected at most %d elements, got %d", tag, len(fields)+1, len(x))
		}
		for i, v := range x[1:] {
			values[fields[i].name], present[fields[i].name] = v, true
		}
	case map[string]any:
		if !mapEvents {
			return fmt.Errorf("expected an array, got a map")
		}
		tag, _ = x["type"].(string)
		if _, ok := vllmSchema[tag]; !ok {
			return fmt.Errorf("invalid tag %v", x["type"])
		}
		for k, v := range x {
			values[k], present[k] = v, true
		}
	default:
		return fmt.Errorf("expected an event, got %T", e)
	}
	for _, f := range vllmSchema[tag] {
		if !present[f.name] {
			if f.required {
				return fmt.Errorf("%s: missing required field %q", tag, f.name)
			}
			continue
		}
		v := values[f.name]
		if v == nil {
			if !f.optional {
				return fmt.Errorf("%s.%s: None where a value is required", tag, f.name)
			}
			continue
		}
		if !f.check(v) {
			return fmt.Errorf("%s.%s: wrong type %T", tag, f.name, v)
		}
	}
	return nil
}
