#!/usr/bin/env python3
"""Golden block hashes for common/kvevents, derived from vLLM's definition.

vLLM's prefix cache (vllm/v1/core/kv_cache_utils.py, hash algorithm
"sha256_cbor") names every full block of a request by

    hash(block) = sha256(cbor2.dumps((parent, tuple(token_ids), extra_keys),
                                     canonical=True))

where parent is the previous block's hash, or for the first block
NONE_HASH = sha256(cbor2.dumps(PYTHONHASHSEED, canonical=True)); extra_keys
is None unless the block has some, and a request's cache_salt is an extra key
of its first block only: extra_keys == (cache_salt,). A trailing partial
block has no hash.

This script computes those hashes with its own canonical CBOR encoder (RFC
8949, shortest-form heads), written from the RFC rather than from the Go
code, and when the cbor2 package is importable it checks every encoding
against cbor2.dumps(..., canonical=True) as well — the call vLLM makes.

    python3 scripts/vllm_block_hashes.py > common/kvevents/testdata/block_hashes.json
"""

import hashlib
import json
import struct
import sys

try:
    import cbor2
except ImportError:  # the hand-written encoder alone still derives the vectors
    cbor2 = None


def head(major, n):
    """The shortest CBOR head for major type `major` and argument n."""
    if n < 24:
        return bytes([major << 5 | n])
    for extra, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | extra]) + struct.pack(fmt, n)
    raise ValueError(n)


def encode(v):
    """Canonical CBOR for the few Python types a block hash input holds."""
    if v is None:
        return b"\xf6"
    if isinstance(v, bool):
        raise TypeError("no booleans in a block hash")
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        b = v.encode("utf-8")
        return head(3, len(b)) + b
    if isinstance(v, (tuple, list)):
        return head(4, len(v)) + b"".join(encode(x) for x in v)
    raise TypeError(type(v))


checked = 0


def sha256_cbor(v):
    global checked
    b = encode(v)
    if cbor2 is not None:
        ref = cbor2.dumps(v, canonical=True)
        if ref != b:
            sys.exit(f"own CBOR {b.hex()} != cbor2 {ref.hex()} for {v!r}")
        checked += 1
    return hashlib.sha256(b).digest()


def none_hash(seed):
    return sha256_cbor(seed)


def block_hashes(seed, tokens, block_size, salt):
    parent = none_hash(seed)
    out = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        extra = (salt,) if (start == 0 and salt) else None
        parent = sha256_cbor((parent, tuple(tokens[start:start + block_size]), extra))
        out.append(parent)
    return out


def tokens(n, seed):
    """Deterministic token ids spread over every CBOR integer width."""
    x, out = seed, []
    widths = (20, 200, 60000, 151000, 2**31 - 1)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append((x >> 33) % widths[i % len(widths)])
    return out


def main():
    cases = []
    for bs in (4, 16):
        for n, label in ((3 * bs, "whole"), (3 * bs + bs // 2, "partial"), (bs - 1, "short")):
            toks = tokens(n, seed=bs * 1000 + n)
            for salt in ("", "tenant-a", "租户-b"):
                hs = block_hashes("0", toks, bs, salt)
                cases.append({
                    "name": f"bs{bs}-{label}-{'nosalt' if not salt else salt}",
                    "seed": "0",
                    "block_size": bs,
                    "salt": salt,
                    "tokens": toks,
                    "hashes": [h.hex() for h in hs],
                })
    # The boundaries of every head width, and a different seed.
    edge = [0, 23, 24, 255, 256, 65535, 65536, 2**31 - 1]
    cases.append({"name": "bs4-edges-seed42", "seed": "42", "block_size": 4, "salt": "",
                  "tokens": edge, "hashes": [h.hex() for h in block_hashes("42", edge, 4, "")]})
    roots = {s: none_hash(s).hex() for s in ("0", "42", "")}
    out = {
        "source": "scripts/vllm_block_hashes.py: vLLM sha256_cbor block hashes",
        "cbor2_checked": checked,
        "roots": roots,
        "cases": cases,
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
