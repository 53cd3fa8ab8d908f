#!/usr/bin/env python3
"""Writes common/kvevents/testdata/vllm_events_schema.json: KV event batches
encoded the way vLLM's ZeroMQ publisher encodes them, for
TestEncodeVLLMMatchesSchemaFixtures to compare EncodeVLLM with byte for byte.

vLLM encodes its KVEventBatch with msgspec. msgspec is not packaged for Debian,
so this script states vLLM's schema as data (the field names, their order,
which have a default; read from vllm/distributed/kv_events.py, see
docs/kv_events.md for the commit) and applies msgspec's two encoding rules
to it, then packs the result with the msgpack package (Debian's
python3-msgpack, run with /usr/bin/python3):

  array_like=True: a struct is an array of its field values in declaration
    order, the tag (the class name) first; omit_defaults leaves out only the
    trailing fields whose value equals their default.
  map (no array_like): a struct is a map in declaration order, the tag first
    under "type"; omit_defaults leaves out every field equal to its default.

Fields without a default are always written, None included. The batch
itself is positional, [ts, events, data_parallel_rank], in both layouts.

Run: /usr/bin/python3 scripts/vllm_kv_events.py
"""

import json
import os
import struct

import msgpack

REQUIRED = object()  # a field without a default

# vLLM's event structs: (field, default) in declaration order.
SCHEMA = {
    "BlockStored": [
        ("block_hashes", REQUIRED),
        ("parent_block_hash", REQUIRED),
        ("token_ids", REQUIRED),
        ("block_size", REQUIRED),
        ("lora_id", REQUIRED),
        ("medium", REQUIRED),
        ("lora_name", REQUIRED),
        ("extra_keys", None),
        ("group_idx", None),
        ("kv_cache_spec_kind", None),
        ("kv_cache_spec_sliding_window", None),
    ],
    "BlockRemoved": [
        ("block_hashes", REQUIRED),
        ("medium", REQUIRED),
        ("group_idx", None),
    ],
    "AllBlocksCleared": [],
}


def event(tag, values, array_like):
    """One event as msgspec writes it, from a dict of its field values."""
    fields = SCHEMA[tag]
    unknown = set(values) - {name for name, _ in fields}
    assert not unknown, f"{tag} has no field {unknown}"
    for name, default in fields:
        assert default is not REQUIRED or name in values, f"{tag}.{name} is required"
    if array_like:
        out = [tag] + [values.get(name, default) for name, default in fields]
        # omit_defaults: drop trailing fields that equal their default
        while len(out) > 1:
            name, default = fields[len(out) - 2]
            if default is REQUIRED or out[-1] != default:
                break
            out.pop()
        return out
    out = {"type": tag}
    for name, default in fields:
        value = values.get(name, default)
        if default is not REQUIRED and value == default:
            continue
        out[name] = value
    return out


def batch(ts, events, array_like, rank=0):
    return msgpack.packb(
        [ts, [event(tag, v, array_like) for tag, v in events], rank],
        use_bin_type=True,
    )


TS = 1700000000.25
BLOCK_SIZE = 4
TOKENS = [1, 2, 3, 4, 5, 6, 7, 8, 300, 70000, 11, 12]
# vLLM's sha256_cbor hashes of TOKENS' three blocks with PYTHONHASHSEED=0
# (the test checks them against kvevents.BlockHashes).
HASHES = [
    "c9d58ba695280d69b243e1e0df813136ca9196b286fb1a021e0b2e028ef071cb",
    "24125b23e68883b5c2141db2959d48433fe6bde2f26bd914efad121d154ab2d6",
    "4b2ff3b0d00563eec9236314c6472c74d93e1826c96e009b0a9ee513b17acf77",
]


def as_bytes(h):
    return bytes.fromhex(h)


def as_int(h):
    # VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: the last 8 bytes, big-endian
    return struct.unpack(">Q", bytes.fromhex(h)[24:])[0]


def ours(hash_of):
    """The batch the engine publishes: two stored runs of one chain, a
    removal, a clear. Nothing goes in the defaulted fields."""
    h = [hash_of(x) for x in HASHES]
    common = {"lora_id": None, "medium": "GPU", "lora_name": None}
    return [
        ("BlockStored", dict(block_hashes=h[:2], parent_block_hash=None,
                             token_ids=TOKENS[:8], block_size=BLOCK_SIZE, **common)),
        ("BlockStored", dict(block_hashes=h[2:], parent_block_hash=h[1],
                             token_ids=TOKENS[8:], block_size=BLOCK_SIZE, **common)),
        ("BlockRemoved", dict(block_hashes=[h[0], h[2]], medium="GPU")),
        ("AllBlocksCleared", {}),
    ]


def vllm_full(hash_of):
    """What a current vLLM sends for the same blocks when it fills the
    defaulted fields too (a salted request: its first block's extra keys
    hold the salt; one full-attention KV cache group)."""
    h = [hash_of(x) for x in HASHES]
    return [
        ("BlockStored", dict(block_hashes=h, parent_block_hash=None,
                             token_ids=TOKENS, block_size=BLOCK_SIZE,
                             lora_id=None, medium="GPU", lora_name=None,
                             extra_keys=[["tenant-a"], None, None], group_idx=0,
                             kv_cache_spec_kind="full_attention",
                             kv_cache_spec_sliding_window=None)),
        ("BlockRemoved", dict(block_hashes=[h[2]], medium="GPU", group_idx=0)),
    ]


def main():
    out = {
        "source": "scripts/vllm_kv_events.py: vLLM's KV event schema, msgspec's encoding rules, python3-msgpack",
        "msgpack_version": ".".join(map(str, msgpack.version)),
        "ts": TS,
        "block_size": BLOCK_SIZE,
        "tokens": TOKENS,
        "hashes": HASHES,
        "payloads": {
            "array": batch(TS, ours(as_bytes), True).hex(),
            "array_int_hashes": batch(TS, ours(as_int), True).hex(),
            "map": batch(TS, ours(as_bytes), False).hex(),
            "map_int_hashes": batch(TS, ours(as_int), False).hex(),
            "vllm_full_array": batch(TS, vllm_full(as_bytes), True).hex(),
            "vllm_full_map": batch(TS, vllm_full(as_int), False).hex(),
        },
    }
    path = os.path.join(os.path.dirname(__file__), "..", "common", "kvevents",
                        "testdata", "vllm_events_schema.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
