#!/usr/bin/env python3
"""Byte fixtures for common/kvevents' msgpack encoding of vLLM's KV events.

vLLM publishes KVEventBatch over ZeroMQ as msgspec msgpack
(vllm/distributed/kv_events.py). The batch is encoded positionally,
[ts, events, data_parallel_rank]. Each event is a msgspec tagged struct;
two layouts are in use:

  array  every field positional, the tag first (vLLM before PR #42892, and
         the layout llm-d's decoder reads field by field):
           ["BlockStored", block_hashes, parent_block_hash, token_ids,
            block_size, lora_id, medium]
           ["BlockRemoved", block_hashes, medium]
           ["AllBlocksCleared"]
  map    vLLM after PR #42892: a map in declaration order, the tag under
         "type", fields with defaults left out when they hold the default:
           {"type": "BlockStored", "block_hashes", "parent_block_hash",
            "token_ids", "block_size", "lora_id", "medium", "lora_name"}
           {"type": "BlockRemoved", "block_hashes", "medium"}
           {"type": "AllBlocksCleared"}

Block hashes are the 32 raw bytes, or with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
the integer int.from_bytes(hash, "big") & (2**64 - 1). This script builds one
batch of each kind with the msgpack package (not msgspec, which is not
packaged here; both write the shortest form of every value, floats as
float64) and prints the payloads in hex.

    /usr/bin/python3 scripts/vllm_event_fixtures.py > common/kvevents/testdata/vllm_events.json
"""

import json
import os
import sys

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_block_hashes import block_hashes  # noqa: E402

TS = 1700000000.25
BLOCK_SIZE = 4
TOKENS = [1, 2, 3, 4, 5, 6, 7, 8, 300, 70000, 11, 12]


def as_int(h):
    return int.from_bytes(h, "big") & ((1 << 64) - 1)


def batch(layout, conv):
    hs = [conv(h) for h in block_hashes("0", TOKENS, BLOCK_SIZE, "")]
    if layout == "array":
        events = [
            ["BlockStored", hs[:2], None, TOKENS[:8], BLOCK_SIZE, None, "GPU"],
            ["BlockStored", hs[2:], hs[1], TOKENS[8:], BLOCK_SIZE, None, "GPU"],
            ["BlockRemoved", [hs[0], hs[2]], "GPU"],
            ["AllBlocksCleared"],
        ]
    else:
        def stored(h, parent, toks):
            return {"type": "BlockStored", "block_hashes": h, "parent_block_hash": parent,
                    "token_ids": toks, "block_size": BLOCK_SIZE, "lora_id": None,
                    "medium": "GPU", "lora_name": None}
        events = [
            stored(hs[:2], None, TOKENS[:8]),
            stored(hs[2:], hs[1], TOKENS[8:]),
            {"type": "BlockRemoved", "block_hashes": [hs[0], hs[2]], "medium": "GPU"},
            {"type": "AllBlocksCleared"},
        ]
    return msgpack.packb([TS, events, 0], use_bin_type=True)


def main():
    out = {
        "source": "scripts/vllm_event_fixtures.py: vLLM KVEventBatch payloads",
        "ts": TS,
        "block_size": BLOCK_SIZE,
        "tokens": TOKENS,
        "hashes": [h.hex() for h in block_hashes("0", TOKENS, BLOCK_SIZE, "")],
        "array": batch("array", bytes).hex(),
        "array_int_hashes": batch("array", as_int).hex(),
        "map": batch("map", bytes).hex(),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
