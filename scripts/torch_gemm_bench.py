#!/usr/bin/env python3
"""Time torch.matmul (cuBLAS) on the shapes of kernels/cuda's BenchmarkMatMulT.

The Go benchmark multiplies f32 tensors (x n×in, w out×in, dst = x·wᵀ) with
our own WMMA kernels, which round each tile to bfloat16 on the way into
shared memory. This script times cuBLAS on the same shapes three ways, so
that the comparison is honest about what differs:

  fp32   f32 inputs, TF32 disabled: plain FP32 SGEMM, the same bytes read
         as ours but no tensor cores;
  tf32   f32 inputs, TF32 tensor cores allowed: the same bytes read as ours,
         tensor-core math with a 10-bit mantissa;
  bf16   bf16 inputs and output: tensor cores, half the bytes read per
         weight. For a decode step (n = 1 or 16), which is bound by reading
         w, this is the rate a bf16 weight copy could reach.

Columns: TFLOP/s = 2·n·in·out / time; weightGB/s = bytes of w / time. Names
match the Go sub-benchmarks (shape/in=/out=/n=). Run it on the GPU that ran
the Go benchmark:

  python3 scripts/torch_gemm_bench.py [--iters 50] [--json out.json]

Needs PyTorch with CUDA; nothing else.
"""

import argparse
import json
import statistics
import sys

import torch

HIDDEN, INTERMEDIATE, VOCAB = 2048, 8192, 128256  # Llama-3.2-1B
SHAPES = [
    ("qo_proj", HIDDEN, HIDDEN),
    ("gate_up_proj", HIDDEN, INTERMEDIATE),
    ("down_proj", INTERMEDIATE, HIDDEN),
    ("lm_head", HIDDEN, VOCAB),
]
BATCHES = [1, 16, 512, 2048]
MODES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}


def time_matmul(x, w, iters):
    """Returns the median seconds of one x @ w.T, timed with CUDA events."""
    out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
    for _ in range(3):  # warm-up: cuBLAS picks its algorithm on first use
        torch.matmul(x, w.t(), out=out)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(x, w.t(), out=out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=50, help="timed repetitions per shape (median reported)")
    ap.add_argument("--modes", default="fp32,tf32,bf16", help="comma-separated subset of fp32,tf32,bf16")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_gemm_bench: PyTorch sees no CUDA device")

    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print(f"{'benchmark':44} {'mode':5} {'ms':>9} {'TFLOP/s':>9} {'weightGB/s':>11}")
    results = []
    gen = torch.Generator(device=dev).manual_seed(0)
    for mode in args.modes.split(","):
        dtype = MODES[mode]
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        for name, inp, out in SHAPES:
            w = (torch.rand(out, inp, generator=gen, device=dev) * 0.04 - 0.02).to(dtype)
            for n in BATCHES:
                x = (torch.rand(n, inp, generator=gen, device=dev) * 2 - 1).to(dtype)
                sec = time_matmul(x, w, args.iters)
                tflops = 2 * n * inp * out / sec / 1e12
                wgbs = w.numel() * w.element_size() / sec / 1e9
                bench = f"{name}/in={inp}/out={out}/n={n}"
                print(f"{bench:44} {mode:5} {sec * 1e3:9.4f} {tflops:9.2f} {wgbs:11.1f}")
                results.append({"benchmark": bench, "mode": mode, "seconds": sec,
                                "tflops": tflops, "weight_gbps": wgbs})
                del x
            del w
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
