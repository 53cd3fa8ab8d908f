// Command phase08_hashcow is the serving engine with a hash-indexed prefix
// cache: each full KV block of a prompt is indexed under a hash chained over
// the blocks before it, a new request reuses the blocks of its longest
// cached prefix by taking a reference on them, and a block with more than
// one holder is copied before anyone writes into it (copy-on-write). The
// index lives in the blockhash package.
//
//	phase08_hashcow bench --compare
//	phase08_hashcow generate --prompt 1,2,3 --max-tokens 8
//	phase08_hashcow logits --prompt 1,2,3
//	phase08_hashcow init-model --arch qwen3 --out out/qwen3
package main

import (
	"flag"
	"fmt"
	"os"

	"kvlab/common/cli"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/phase08_hashcow/blockhash"
)

func main() {
	os.Exit(cli.Main(cli.Variant{
		Name:        "phase08_hashcow",
		Summary:     "prefix reuse through a chained block-hash index, with copy-on-write",
		PrefixCache: blockhash.PrefixCache,
		CacheFlags:  blockHashFlag,
	}, os.Args[1:], os.Stdout, os.Stderr))
}

// blockKeys are the keys -block-hash chooses from.
var blockKeys = map[string]blockhash.HashFunc{
	"maphash":  blockhash.MapHash,
	"xxhash":   blockhash.XXHash,
	"fnv1a":    blockhash.FNV1a,
	"wordhash": blockhash.WordHash,
}

// blockHashFlag adds -block-hash, which chooses the index's block key. With
// vllm the index is keyed by vLLM's block-hash chain, named like the KV
// events (serve's -prefix-caching-hash-algo, -kv-hash-seed, -lora-name),
// so the keys it looks up are the hashes a vLLM-side consumer of those
// events computes.
func blockHashFlag(fs *flag.FlagSet) func() (cli.CacheBuilder, error) {
	name := fs.String("block-hash", "maphash", "the index's block key: maphash (the default: fast, this process only), xxhash, fnv1a, wordhash, or vllm (vLLM's block-hash chain, as the KV events carry it; about 15 times the cost per token under sha256_cbor)")
	return func() (cli.CacheBuilder, error) {
		if *name == "vllm" {
			// serve's flags, when this runnable has them: the keys are
			// then the hashes its KV events announce.
			seed, algo, lora := kvevents.DefaultHashSeed, kvevents.SHA256CBOR, ""
			if f := fs.Lookup("kv-hash-seed"); f != nil {
				seed = f.Value.String()
			}
			if f := fs.Lookup("prefix-caching-hash-algo"); f != nil {
				if err := algo.UnmarshalText([]byte(f.Value.String())); err != nil {
					return nil, err
				}
			}
			if f := fs.Lookup("lora-name"); f != nil {
				lora = f.Value.String()
			}
			return blockhash.VLLMPrefixCache(kvevents.NewHasher(algo, seed, lora)), nil
		}
		h, ok := blockKeys[*name]
		if !ok {
			return nil, fmt.Errorf("-block-hash: unknown key %q (want maphash, xxhash, fnv1a, wordhash or vllm)", *name)
		}
		return func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
			return blockhash.New(a, blockSize, blockhash.WithHash(h))
		}, nil
	}
}
