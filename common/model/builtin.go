package model

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// BuiltinArchs are the names BuiltinFor accepts, in the order usage text
// lists them; "llama" is the default of every runnable.
var BuiltinArchs = []string{"llama", "qwen3", "gemma3"}

// Builtin returns the options of the built-in synthetic model: a small
// Llama-3.2-shaped model, sized so the default benchmark finishes in a few
// minutes on a 2-core CPU.
func Builtin() SynthOptions { return DefaultSynth(ArchLlama) }

// BuiltinWindow is the sliding window of the built-in Gemma-3's local
// layers: shorter than the 1,024-token shared prefix of the
// prefix_caching workload, so every request runs past it.
const BuiltinWindow = 256

// BuiltinFor returns the options of the built-in model of arch ("llama",
// "qwen3" or "gemma3"). Llama's is Builtin. Qwen3's is DefaultSynth's.
// Gemma-3's has the default model's size (hidden 256, 4 layers) so that a
// benchmark on it takes about as long: Gemma-3's five local layers to one
// global one scaled down to three to one (layers 0–2 local with window
// BuiltinWindow, layer 3 global), one KV head as in Gemma-3-1B.
func BuiltinFor(arch string) (SynthOptions, error) {
	switch arch {
	case "llama", ArchLlama:
		return Builtin(), nil
	case "qwen3", ArchQwen3:
		return DefaultSynth(ArchQwen3), nil
	case "gemma3", ArchGemma3:
		o := DefaultSynth(ArchGemma3)
		o.Layers, o.SlidingWindowPattern, o.SlidingWindow = 4, 4, BuiltinWindow
		return o, nil
	}
	return SynthOptions{}, fmt.Errorf("unknown architecture %q (want one of %q)", arch, BuiltinArchs)
}

// synthFormat is mixed into the cache key of the built-in model; raise it
// when WriteSynthetic's files change, so older caches are not reused.
// Format 2 added the tokenizer files; format 3 gave Gemma-3 a Gemma-style
// SentencePiece tokenizer instead of the Llama-3-style one.
const synthFormat = 3

// BuiltinDir returns the directory of the built-in (Llama) model, writing
// it first if it is not there yet; BuiltinDirFor("llama").
func BuiltinDir() (string, error) { return BuiltinDirFor("llama") }

// BuiltinDirFor returns the directory of the built-in model of arch
// (BuiltinFor), writing it first if it is not there yet. It lives in the
// user's cache directory (KVLAB_CACHE overrides it), under a name derived
// from the options — the architecture among them — so each architecture
// has its own directory and a change of a default writes a fresh model
// instead of reusing a stale one.
func BuiltinDirFor(arch string) (string, error) {
	opts, err := BuiltinFor(arch)
	if err != nil {
		return "", err
	}
	root := os.Getenv("KVLAB_CACHE")
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "kvlab")
	}
	key, err := json.Marshal(struct {
		Format int
		Opts   SynthOptions
	}{synthFormat, opts})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, builtinDirName(opts.Arch, sha256.Sum256(key)))
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	// Write next to the final place and rename, so an interrupted write
	// never leaves a half-written model that later runs would trust.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	tmp, err := os.MkdirTemp(root, "writing-")
	if err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := WriteSynthetic(tmp, opts); err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr != nil {
			return "", fmt.Errorf("built-in model: %w", err)
		}
	}
	return dir, nil
}

// builtinDirName names a built-in model's directory: "default-" and 12 hex
// digits of the key's hash for Llama (the name it always had), with the
// architecture's short name in between for the others.
func builtinDirName(arch string, sum [32]byte) string {
	prefix := "default-"
	switch arch {
	case ArchQwen3:
		prefix += "qwen3-"
	case ArchGemma3:
		prefix += "gemma3-"
	}
	return fmt.Sprintf("%s%x", prefix, sum[:6])
}
