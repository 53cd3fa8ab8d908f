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

With --all-algos it writes the vectors of every algorithm vLLM's
--prefix-caching-hash-algo accepts (sha256, sha256_cbor, xxhash,
xxhash_cbor): roots, chains with a LoRA name and a salt, both seeds,
negative and wide token ids, and the raw pickle bytes of the objects the
pickle-based algorithms hash, for testing the Go pickle encoder directly:

    /usr/bin/python3 scripts/vllm_block_hashes.py --all-algos \\
        > common/kvevents/testdata/block_hashes_algos.json

That mode needs the xxhash package (Debian's python3-xxhash) and is best run
with cbor2 as well (python3-cbor2); the definitions it follows are written
out above all_algos() below, with the vLLM commit they were read at.
"""

import hashlib
import json
import pickle
import struct
import sys

try:
    import cbor2
except ImportError:  # the hand-written encoder alone still derives the vectors
    cbor2 = None

try:
    import xxhash
except ImportError:  # only --all-algos needs it
    xxhash = None


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


# ---------------------------------------------------------------------------
# Every algorithm (--all-algos).
#
# What vLLM does, as read at commit 002f10e0cfa1373a19a0d2756598a34b700d20e5
# (vllm/config/cache.py, vllm/v1/core/kv_cache_utils.py; the four hash
# functions live in vLLM's hashing utilities, vllm/utils/hashing.py):
#
# * --prefix-caching-hash-algo takes sha256 (the default), sha256_cbor,
#   xxhash and xxhash_cbor. Each serializes the same Python object and
#   digests the bytes:
#       sha256       SHA-256 of pickle.dumps(obj, protocol=5)
#       sha256_cbor  SHA-256 of cbor2.dumps(obj, canonical=True)
#       xxhash       XXH3-128 of the pickle, as xxhash.xxh3_128_digest gives
#                    it (16 bytes, big-endian)
#       xxhash_cbor  XXH3-128 of the canonical CBOR
#   (pickle.HIGHEST_PROTOCOL is 5 on every Python vLLM supports.)
# * A block's object is (parent, tuple(token_ids), extra_keys); parent is
#   the previous block's digest, or NONE_HASH for block 0.
# * NONE_HASH is hash_fn(seed), seed the string PYTHONHASHSEED when it is
#   set. When it is not: "vllm-none-hash" for sha256 and sha256_cbor, and a
#   fresh random string (os.urandom(32).hex()) for the xxhash pair, so their
#   hashes are private to one process. (Older vLLM releases used 32 random
#   bytes as NONE_HASH for every algorithm when PYTHONHASHSEED was unset.)
# * extra_keys: the request's LoRA name (its lora_name) on every block, then
#   the cache_salt on block 0 only; None when there are none. Multimodal and
#   prompt-embedding keys sit between and after them; this project has none.
#
# Strings are made the way a server makes them at run time (decoded from
# bytes), not taken from this file's literals, which Python may share: a
# pickle memoizes objects by identity, so two equal strings that are one
# object (CPython keeps one object for "" and for each one-character Latin-1
# string) are written once and then referenced, and the bytes change.
# ---------------------------------------------------------------------------

VLLM_COMMIT = "002f10e0cfa1373a19a0d2756598a34b700d20e5"
ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
UNSET_SEED = "vllm-none-hash"  # NONE_HASH's seed for sha256/sha256_cbor without PYTHONHASHSEED


def fresh(s):
    """s as a string built at run time, not a shared literal."""
    return s.encode("utf-8").decode("utf-8")


def serialize(algo, obj):
    if algo.endswith("_cbor"):
        return checked_cbor(obj)
    return pickle.dumps(obj, protocol=5)


def checked_cbor(v):
    global checked
    b = encode(v)
    if cbor2 is not None:
        ref = cbor2.dumps(v, canonical=True)
        if ref != b:
            sys.exit(f"own CBOR {b.hex()} != cbor2 {ref.hex()} for {v!r}")
        checked += 1
    return b


def hash_fn(algo, obj):
    data = serialize(algo, obj)
    if algo.startswith("sha256"):
        return hashlib.sha256(data).digest()
    return xxhash.xxh3_128_digest(data)


def extra_keys(lora, salt, first):
    keys = []
    if lora:
        keys.append(lora)
    if first and salt:
        keys.append(salt)
    return tuple(keys) if keys else None


def chain(algo, seed, toks, block_size, salt, lora):
    parent = hash_fn(algo, fresh(seed))
    lora = fresh(lora) if lora else lora
    salt = fresh(salt) if salt else salt
    hashes, extras = [], []
    for start in range(0, len(toks) - block_size + 1, block_size):
        extra = extra_keys(lora, salt, start == 0)
        parent = hash_fn(algo, (parent, tuple(toks[start:start + block_size]), extra))
        hashes.append(parent.hex())
        extras.append(list(extra) if extra else None)
    return hashes, extras


# Token ids at the pickle width boundaries (BININT1, BININT2, BININT, LONG1)
# and the CBOR ones, negative ids (vLLM never makes them, but the encoders
# must agree on them), all within int32.
NARROW = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**31 - 1, -1, -24, -25,
          -128, -129, -256, -257, -32768, -65536, -65537, -2**31, 151000, 7]
# Ids beyond int32: LONG1 in a pickle, 8-byte heads in CBOR.
WIDE = [2**31, -2**31 - 1, 2**32 - 1, 2**32, -2**32, 2**39, -2**39, 2**40,
        -2**40, 2**47 - 1, 2**63 - 1, -2**63]


def runs(spec):
    out = []
    for v, n in spec:
        out += [v] * n
    return out


def pickle_case(name, obj, **desc):
    b = pickle.dumps(obj, protocol=5)
    case = {"name": name, **desc}
    if len(b) <= 600:
        case["pickle"] = b.hex()
    else:
        case["pickle_len"] = len(b)
        case["pickle_sha256"] = hashlib.sha256(b).hexdigest()
    return case


def text(s):
    """A string for the JSON file: itself, or {"repeat": c, "times": n} for a
    long run of one character."""
    if len(s) > 1000 and s == s[0] * len(s):
        return {"repeat": s[0], "times": len(s)}
    return s


def block_pickle(name, parent, toks=None, extra=None, token_runs=None):
    if token_runs is not None:
        toks = runs(token_runs)
    obj = (parent, tuple(toks), tuple(fresh(s) for s in extra) if extra is not None else None)
    desc = {"parent": parent.hex()}
    if token_runs is not None:
        desc["token_runs"] = token_runs
    else:
        desc["tokens"] = toks
    desc["extra"] = [text(x) for x in extra] if extra is not None else None
    return pickle_case(name, obj, **desc)


def pickles():
    p32, p16 = bytes(range(32)), bytes(range(100, 116))
    big = "x" * 70000
    cases = [
        block_pickle("ints-narrow", p32, NARROW),
        block_pickle("ints-wide", p32, WIDE),
        block_pickle("tuple0", p32, []),
        block_pickle("tuple1", p32, [5]),
        block_pickle("tuple2", p32, [5, 300]),
        block_pickle("tuple3", p32, [5, 300, 70000]),
        block_pickle("tuple4", p32, [5, 300, 70000, -3]),
        block_pickle("parent16-salt", p16, [1, 2, 3, 4], ["tenant-a"]),
        block_pickle("lora-salt", p32, [1, 2, 3, 4], ["adapter-1", "租户-b"]),
        block_pickle("lora-only", p16, [9, 8, 7, 6], ["adapter-1"]),
        block_pickle("equal-strings-distinct", p32, [1], ["ab", "ab"]),
        block_pickle("equal-1char-shared", p32, [1], ["a", "a"]),
        block_pickle("equal-1char-latin1-shared", p32, [1], ["é", "é"]),
        block_pickle("equal-1char-cjk-distinct", p32, [1], ["租", "租"]),
        block_pickle("string-255", p32, [1], ["s" * 255]),
        block_pickle("string-256", p32, [1], ["s" * 256]),
        block_pickle("bytes-300", bytes(300), [1]),
        # Framing: the pickler closes a frame at the first object that
        # starts with 64 KiB or more in it, and writes a payload of 64 KiB
        # or more outside any frame.
        block_pickle("frame-splits-inside-tokens", p32, token_runs=[[70000, 13104]]),
        block_pickle("frame-splits-before-extra", p32, token_runs=[[70000, 13100]]),
        block_pickle("frame-splits-before-salt", p32, token_runs=[[70000, 13099], [1, 1]], extra=["adapter", "salt"]),
        block_pickle("frame-two-splits", p32, token_runs=[[-70000, 27000]], extra=["s"]),
        block_pickle("huge-salt-outside-frames", p32, [1, 2], [big]),
        block_pickle("huge-lora-and-salt", p16, [1, 2], [big, "y" * 66000]),
    ]
    for s in ("0", "", "42", UNSET_SEED, "é", "種子", "s" * 300, big):
        cases.append(pickle_case("str-" + (s if len(s) < 20 else f"{s[0]}x{len(s)}"), fresh(s), str=text(s)))
    return cases


def all_algos():
    if xxhash is None or not hasattr(xxhash, "xxh3_128_digest"):
        sys.exit("--all-algos needs the xxhash package with xxh3_128_digest (Debian: python3-xxhash)")
    roots = {a: {s: hash_fn(a, fresh(s)).hex() for s in ("0", "42", "", UNSET_SEED)} for a in ALGOS}
    chains = []
    lcg = tokens(40, seed=7)
    for algo in ALGOS:
        for seed in ("0", "42"):
            for bs, toks in ((4, NARROW[:12]), (16, lcg)):
                for lora, salt in (("", ""), ("", "tenant-a"), ("adapter-1", ""), ("adapter-1", "租户-b")):
                    hs, extras = chain(algo, seed, toks, bs, salt, lora)
                    chains.append({
                        "name": f"{algo}-seed{seed}-bs{bs}-{lora or 'nolora'}-{salt or 'nosalt'}",
                        "algo": algo, "seed": seed, "block_size": bs, "lora": lora, "salt": salt,
                        "tokens": toks, "extra_keys": extras, "hashes": hs,
                    })
        # Negative and wide ids, a one-character LoRA name equal to the salt
        # (one shared object in the pickle), vLLM's seed when unset.
        for name, seed, toks, lora, salt in (
            ("negative", "0", NARROW[9:21], "", ""),
            ("wide", "0", WIDE, "", "s"),
            ("shared-1char", "42", NARROW[:8], "a", "a"),
            ("unset-seed", UNSET_SEED, NARROW[:8], "", ""),
        ):
            hs, extras = chain(algo, seed, toks, 4, salt, lora)
            chains.append({
                "name": f"{algo}-{name}", "algo": algo, "seed": seed, "block_size": 4,
                "lora": lora, "salt": salt, "tokens": toks, "extra_keys": extras, "hashes": hs,
            })
    out = {
        "source": "scripts/vllm_block_hashes.py --all-algos: vLLM's block hashes for every --prefix-caching-hash-algo",
        "vllm_commit": VLLM_COMMIT,
        "python": sys.version.split()[0],
        "xxhash": xxhash.VERSION,
        "cbor2_checked": checked,
        "unset_seed": UNSET_SEED,
        "roots": roots,
        "chains": chains,
        "pickles": pickles(),
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--all-algos"]:
        all_algos()
    elif sys.argv[1:]:
        sys.exit("usage: vllm_block_hashes.py [--all-algos]")
    else:
        main()
