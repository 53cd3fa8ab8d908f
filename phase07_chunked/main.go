// Command phase07_chunked is the baseline serving engine: a paged KV cache,
// chunked prefill and continuous batching, with no reuse of KV between
// requests. Every prompt is prefilled from its first token, even when the
// request before it sent the same thousand-token system prompt; phase 8
// removes exactly that waste.
//
//	phase07_chunked bench --workload prefix_caching
//	phase07_chunked chunking      # whole-prompt against chunked prefill: TTFT and ITL (docs/phase07.md)
//	phase07_chunked generate --prompt 1,2,3 --max-tokens 8
//	phase07_chunked logits --prompt 1,2,3
//	phase07_chunked init-model --arch qwen3 --out /tmp/qwen3
package main

import (
	"os"

	"kvlab/common/cli"
)

func main() {
	os.Exit(cli.Main(cli.Variant{
		Name:    "phase07_chunked",
		Summary: "baseline engine: paged KV, chunked prefill, continuous batching, no prefix reuse",
	}, os.Args[1:], os.Stdout, os.Stderr))
}
