package model

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Builtin returns the options of the built-in synthetic model: a small
// Llama-3.2-shaped model, sized so the default benchmark finishes in a few
// minutes on a 2-core CPU.
func Builtin() SynthOptions { return DefaultSynth(ArchLlama) }

// synthFormat is mixed into the cache key of the built-in model; raise it
// when WriteSynthetic's files change, so older caches are not reused.
// Format 2 added the tokenizer files.
const synthFormat = 2

// BuiltinDir returns the directory of the built-in model, writing it
// first if it is not there yet. It lives in the user's cache directory
// (KVLAB_CACHE overrides it), under a name derived from the options, so a
// change of the default writes a fresh model instead of reusing a stale one.
func BuiltinDir() (string, error) {
	root := os.Getenv("KVLAB_CACHE")
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "kvlab")
	}
	opts := Builtin()
	key, err := json.Marshal(struct {
		Format int
		Opts   SynthOptions
	}{synthFormat, opts})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, fmt.Sprintf("default-%x", sha256.Sum256(key))[:len("default-")+12])
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
