// Package tokenizer turns text into token ids and back for the models the
// engine serves, reading the files a HuggingFace checkpoint ships:
// tokenizer.json (vocabulary, merges, pre-tokenizer, added tokens) and
// tokenizer_config.json (bos and eos tokens, add_bos_token, the Jinja chat
// template).
//
// It implements byte-level BPE, the scheme of GPT-2, Llama 3 and Qwen2/3:
// text is split at the added tokens, normalized, cut into words by the
// pre-tokenizer's regular expression, each word's UTF-8 bytes are written
// in GPT-2's 256-character alphabet, and ranked merges join neighbouring
// symbols until none applies. Other tokenizer types (WordPiece, Unigram,
// SentencePiece-style BPE with byte fallback) are refused with an error.
//
// The BPE is this package's own, not a library's: the pure-Go HuggingFace
// tokenizer port available (github.com/sugarme/tokenizer) compiles the
// split pattern with Go's regexp, which has no lookahead, and so panics on
// the Llama 3 and Qwen3 patterns (\s+(?!\S)); it also has no
// ignore_merges, which Llama 3 needs. Here the lookahead is rewritten by
// hand (see newSplitter) and \s is made Unicode-aware as in the reference.
// Chat templates are rendered with github.com/nikolalohinski/gonja/v2, a
// pure-Go Jinja, which renders the real Llama 3 and Qwen3 templates
// exactly (see TestChatTemplate). docs/tokenizer.md has the details.
//
// WriteSynthetic writes a small Llama-3-style tokenizer for the synthetic
// models of package model.
package tokenizer
