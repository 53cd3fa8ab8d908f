// Package model loads HuggingFace Llama, Qwen3 and Gemma-3 (text-only)
// checkpoints and runs their forward pass on a kernels.Backend.
//
// The package reads the files a HuggingFace checkpoint directory holds:
// config.json and the weights in safetensors form, either one
// model.safetensors or shards listed by model.safetensors.index.json. Both
// readers are written by hand so the formats are visible in the code.
//
// WriteSynthetic produces a small, seeded checkpoint with the same file
// layout and tensor names as a real one, so everything downstream (tests,
// benchmarks, the engine) can run without downloading weights.
//
// The forward is written once for both architectures: Qwen3 differs from
// Llama only by a per-head RMSNorm on queries and keys before RoPE. Gemma-3
// adds a scaled embedding, norms with (1 + weight) around both sublayers, a
// gelu-tanh MLP, optional soft caps, and sliding-window attention with its
// own RoPE theta on most layers (kernels.AttnShape.Window); its element-wise
// operations come from kernels.GemmaOps. Every
// operation goes through the Backend, so the same code drives the CPU
// backend and a device backend.
package model
