// Package tokenizer turns text into token ids and back for the models the
// engine serves, reading the files a HuggingFace checkpoint ships:
// tokenizer.json (vocabulary, merges, pre-tokenizer, added tokens) and
// tokenizer_config.json (bos and eos tokens, add_bos_token, the Jinja chat
// template).
//
// It implements the two BPE schemes, chosen by what tokenizer.json says:
//
//   - byte-level BPE (GPT-2, Llama 3, Qwen2/3): text is split at the added
//     tokens, normalized, cut into words by the pre-tokenizer's regular
//     expression, each word's UTF-8 bytes are written in GPT-2's
//     256-character alphabet, and ranked merges join neighbouring symbols
//     until none applies;
//   - SentencePiece-style BPE (Llama 2, Mistral, Gemma): spaces are written
//     as "▁" (by a Replace normalizer or the Metaspace pre-tokenizer), the
//     merges run over Unicode characters, and a character outside the
//     vocabulary becomes its UTF-8 bytes as <0xNN> tokens (byte fallback);
//     decoding turns "▁" back into spaces and byte tokens back into bytes.
//
// Other tokenizer types (WordPiece, Unigram) are refused with an error.
//
// The BPE is this package's own, not a library's: the pure-Go HuggingFace
// tokenizer port available (github.com/sugarme/tokenizer) compiles the
// split pattern with Go's regexp, which has no lookahead, and so panics on
// the Llama 3 and Qwen3 patterns (\s+(?!\S)); it also has no
// ignore_merges, which Llama 3 needs. Here the lookahead is rewritten by
// hand (see newSplitter) and \s is made Unicode-aware as in the reference.
// Chat templates are rendered with github.com/nikolalohinski/gonja/v2, a
// pure-Go Jinja, which renders the real Llama 3 and Qwen3 templates
// exactly (see TestChatTemplate), and Gemma-3's once the one construct its
// parser lacks, an inline if in parentheses, is respelled (rewriteInlineIf).
// tests/tokenizers (make test-tokenizers) checks all three models' real
// files against transformers.js and HuggingFace's tokenizers.
// docs/tokenizer.md has the details.
//
// WriteSynthetic writes a small Llama-3-style tokenizer for the synthetic
// models of package model, WriteSyntheticGemma a Gemma-3-style one.
package tokenizer
