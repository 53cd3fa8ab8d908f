#!/usr/bin/env python3
"""Independent PyTorch reference forward for Llama, Qwen3 and Gemma-3 checkpoints.

It reads a HuggingFace checkpoint directory (config.json plus
model.safetensors, or shards listed in model.safetensors.index.json) with
nothing but json, struct and torch: the safetensors format is parsed by hand,
and neither the `transformers` nor the `safetensors` package is used. The
forward follows HuggingFace's semantics, computed plainly in float32:

  * RMSNorm: x * rsqrt(mean(x^2) + eps) * weight
  * RoPE: rotate_half convention, inverse frequencies as in HuggingFace's
    default and "llama3" rope initialisation
  * grouped-query attention by repeating each KV head for its query heads,
    causal softmax, scale 1/sqrt(head_dim)
  * Qwen3: RMSNorm over each query and key head (q_norm, k_norm) before RoPE
  * SiLU-gated MLP; lm_head, or the embeddings when tie_word_embeddings
  * Gemma-3 (Gemma3ForCausalLM, text only), from its formulas: embeddings
    times sqrt(hidden_size) rounded to the weights' dtype (the product taken
    in that dtype); RMSNorm multiplying by (1 + weight); q/k norms; scores
    scaled by query_pre_attn_scalar^-1/2 and optionally soft-capped
    (cap * tanh(s / cap)); sliding layers (layer_types, or every layer whose
    index + 1 is not a multiple of sliding_window_pattern) see keys j with
    p - sliding_window < j <= p and rotate with theta rope_local_base_freq,
    global layers see every j <= p and rotate with rope_theta and
    rope_scaling; the attention and MLP outputs are normed
    (post_attention_layernorm, post_feedforward_layernorm) before each
    residual add, the MLP input by pre_feedforward_layernorm; gelu (tanh
    approximation) gated MLP; final logits optionally soft-capped

Usage, one model:

  python3 scripts/torch_reference.py --model DIR --prompt 1,2,3 --prompt 7 [--out FILE]

Usage, a set of cases written by common/model's TestGoldenLogits:

  python3 scripts/torch_reference.py --cases DIR/cases.json --out-dir common/model/testdata/golden

Regenerating the golden files of TestGoldenLogits (from the repository root):

  d=$(mktemp -d) && go test ./common/model -run TestGoldenLogits -args -golden-models "$d" && python3 scripts/torch_reference.py --cases "$d/cases.json" --out-dir common/model/testdata/golden

Each output JSON holds, per prompt, the logits of the prompt's last position,
plus the SHA-256 of every safetensors file read, so the Go test can tell a
stale golden file from a wrong forward.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import torch

REGENERATE = (
    'd=$(mktemp -d) && go test ./common/model -run TestGoldenLogits -args -golden-models "$d" '
    '&& python3 scripts/torch_reference.py --cases "$d/cases.json" --out-dir common/model/testdata/golden'
)

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


# --- safetensors, by hand ---------------------------------------------------


def read_safetensors(path):
    """Returns ({name: float32 tensor}, sha256 hex) for one safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = raw[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        if end > len(data):
            raise ValueError(f"{path}: tensor {name} data_offsets {e['data_offsets']} overrun {len(data)} data bytes")
        dtype = DTYPES.get(e["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {e['dtype']}")
        buf = bytearray(data[begin:end])  # a writable copy, as frombuffer wants
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).to(torch.float32)
    return out, hashlib.sha256(raw).hexdigest()


def read_checkpoint(model_dir):
    """Returns (weights, {file name: sha256}) for a checkpoint directory."""
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        files = ["model.safetensors"]
    else:
        with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    weights, hashes = {}, {}
    for name in files:
        w, h = read_safetensors(os.path.join(model_dir, name))
        weights.update(w)
        hashes[name] = h
    return weights, hashes


# --- the model ---------------------------------------------------------------


def inv_freq(cfg, base=None, rs=None):
    """RoPE inverse frequencies, as HuggingFace's rope initialisation computes them.

    base and rs default to the config's rope_theta and rope_scaling."""
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if base is None:
        base = cfg.get("rope_theta", 10000.0)
        rs = cfg.get("rope_scaling")
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))
    kind = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / rs["factor"]
    if kind != "llama3":
        raise ValueError(f"unsupported rope_scaling type {kind}")
    factor = rs["factor"]
    low, high = rs["low_freq_factor"], rs["high_freq_factor"]
    old_ctx = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv
    # Long wavelengths are stretched by factor, short ones kept, and the band
    # between blended linearly.
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled)


def rms_norm(x, weight, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward_last(cfg, w, ids):
    """Logits (float32, vocab) of the last position of prompt ids."""
    arch = cfg["architectures"][0]
    if arch not in ("LlamaForCausalLM", "Qwen3ForCausalLM"):
        raise ValueError(f"unsupported architecture {arch}")
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    n = len(ids)

    x = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
    pos = torch.arange(n, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq(cfg)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    mask = torch.full((n, n), float("-inf")).triu(1)
    scale = hd**-0.5

    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, nh, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, nkv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, nkv, hd)
        if arch == "Qwen3ForCausalLM":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale + mask
        probs = torch.softmax(scores, dim=-1)
        o = torch.einsum("hqk,khd->qhd", probs, v).reshape(n, nh * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T

        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T

    last = rms_norm(x[-1:], w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return (last @ head.T)[0]


DISK_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def gemma3_layer_types(cfg):
    if cfg.get("layer_types"):
        return cfg["layer_types"]
    pattern = cfg.get("sliding_window_pattern", 6)
    return [
        "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(cfg["num_hidden_layers"])
    ]


def gemma3_norm(x, weight, eps):
    """Gemma's RMSNorm: the normalised x times (1 + weight), in float32."""
    var = x.pow(2).mean(-1, keepdim=True)
    return (x * torch.rsqrt(var + eps)) * (1.0 + weight)


def gelu_tanh(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x**3)))


def soft_cap(x, cap):
    return torch.tanh(x / cap) * cap


def gemma3_forward_last(cfg, w, ids, embed_dtype):
    """Logits (float32, vocab) of the last position of prompt ids, Gemma-3."""
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or 256
    eps = cfg.get("rms_norm_eps", 1e-6)
    hidden = cfg["hidden_size"]
    window = cfg.get("sliding_window") or 4096
    attn_cap = cfg.get("attn_logit_softcapping")
    final_cap = cfg.get("final_logit_softcapping")
    n = len(ids)

    # The scale is a float32 scalar in the embeddings' dtype, and so is the
    # product.
    emb = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)].to(embed_dtype)
    scale = torch.tensor(hidden**0.5, dtype=torch.float32).to(embed_dtype)
    x = (emb * scale).to(torch.float32)

    pos = torch.arange(n, dtype=torch.float32)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    masks, ropes = {}, {}
    for kind in ("full_attention", "sliding_attention"):
        visible = j <= i
        if kind == "sliding_attention":
            visible = visible & (j > i - window)
            freqs = pos[:, None] * inv_freq(cfg, cfg.get("rope_local_base_freq", 10000.0), None)[None, :]
        else:
            freqs = pos[:, None] * inv_freq(cfg, cfg.get("rope_theta", 1000000.0), cfg.get("rope_scaling"))[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        ropes[kind] = (angles.cos()[:, None, :], angles.sin()[:, None, :])
        masks[kind] = torch.zeros(n, n).masked_fill(~visible, float("-inf"))
    scaling = cfg.get("query_pre_attn_scalar", 256) ** -0.5

    for layer, kind in enumerate(gemma3_layer_types(cfg)):
        p = f"model.layers.{layer}."
        cos, sin = ropes[kind]
        h = gemma3_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, nh, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, nkv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, nkv, hd)
        q = gemma3_norm(q, w[p + "self_attn.q_norm.weight"], eps)
        k = gemma3_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scaling
        if attn_cap:
            scores = soft_cap(scores, attn_cap)
        probs = torch.softmax(scores + masks[kind], dim=-1)
        o = torch.einsum("hqk,khd->qhd", probs, v).reshape(n, nh * hd)
        o = o @ w[p + "self_attn.o_proj.weight"].T
        x = x + gemma3_norm(o, w[p + "post_attention_layernorm.weight"], eps)

        h = gemma3_norm(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        m = (gelu_tanh(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        x = x + gemma3_norm(m, w[p + "post_feedforward_layernorm.weight"], eps)

    last = gemma3_norm(x[-1:], w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    logits = (last @ head.T)[0]
    if final_cap:
        logits = soft_cap(logits, final_cap)
    return logits


def run(model_dir, prompts, name):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    weights, hashes = read_checkpoint(model_dir)
    with torch.no_grad():
        if cfg["architectures"][0] == "Gemma3ForCausalLM":
            dt = DISK_DTYPES[cfg.get("torch_dtype") or cfg.get("dtype") or "float32"]
            logits = [gemma3_forward_last(cfg, weights, p, dt).tolist() for p in prompts]
        else:
            logits = [forward_last(cfg, weights, p).tolist() for p in prompts]
    return {
        "name": name,
        "architecture": cfg["architectures"][0],
        "torch_version": torch.__version__,
        "regenerate": REGENERATE,
        "safetensors_sha256": hashes,
        "prompts": prompts,
        "logits": logits,
    }


def write_json(obj, path):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="checkpoint directory")
    ap.add_argument("--prompt", action="append", default=[], help="comma-separated token ids; repeatable")
    ap.add_argument("--out", help="output JSON file (default: stdout)")
    ap.add_argument("--cases", help="cases.json listing model directories and prompts")
    ap.add_argument("--out-dir", help="directory for one <name>.json per case")
    args = ap.parse_args()

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if args.cases:
        if not args.out_dir:
            ap.error("--cases needs --out-dir")
        with open(args.cases) as f:
            cases = json.load(f)["cases"]
        base = os.path.dirname(os.path.abspath(args.cases))
        for c in cases:
            out = run(os.path.join(base, c["dir"]), c["prompts"], c["name"])
            path = os.path.join(args.out_dir, c["name"] + ".json")
            write_json(out, path)
            print(f"wrote {path}", file=sys.stderr)
        return
    if not args.model or not args.prompt:
        ap.error("give --model and at least one --prompt, or --cases")
    prompts = [[int(t) for t in p.split(",")] for p in args.prompt]
    out = run(args.model, prompts, os.path.basename(os.path.normpath(args.model)))
    if args.out:
        write_json(out, args.out)
    else:
        json.dump(out, sys.stdout)
        print()


if __name__ == "__main__":
    main()
