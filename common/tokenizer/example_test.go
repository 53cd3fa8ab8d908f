package tokenizer_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"kvlab/common/tokenizer"
)

// A tokenizer directory holds tokenizer.json and tokenizer_config.json, as
// a HuggingFace checkpoint does. This one is a tiny Llama-3-style fixture.
func Example() {
	tok, err := tokenizer.Load("testdata/llama3")
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.EncodePrompt("hello the world")
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids))
	fmt.Println(tok.EOS())
	// Output:
	// [272 262 260 271]
	// "hello the world"
	// [276 273]
}

// Streaming output: "é" is two bytes, here in two tokens; the first alone
// is not text yet.
func ExampleStream() {
	tok, err := tokenizer.Load("testdata/llama3")
	if err != nil {
		log.Fatal(err)
	}
	s := tok.NewStream()
	for _, id := range []int32{'c', 'a', 'f', 0xC3, 0xA9, 276} {
		fmt.Printf("%q ", s.Next(id))
	}
	fmt.Printf("%q\n", s.Flush())
	// Output: "c" "a" "f" "" "é" "" ""
}

func ExampleTokenizer_ApplyChatTemplate() {
	tok, err := tokenizer.Load("testdata/llama3")
	if err != nil {
		log.Fatal(err)
	}
	text, err := tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "hello"}}, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output: "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
}

// One text through both schemes, with the synthetic tokenizers of the
// built-in models (4096 ids, merges learned from a short English text):
// Llama-3-style byte-level BPE writes every byte in its 256-character
// alphabet (a space is "Ġ", é's two bytes are "Ã©"); Gemma-3-style
// SentencePiece BPE writes a space as "▁" and falls back to byte tokens
// for what its vocabulary lacks (é and 日本 here).
func Example_schemes() {
	dir, err := os.MkdirTemp("", "schemes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	llama, gemma := filepath.Join(dir, "llama"), filepath.Join(dir, "gemma")
	if err := tokenizer.WriteSynthetic(llama, 4096, 1, 2); err != nil {
		log.Fatal(err)
	}
	if err := tokenizer.WriteSyntheticGemma(gemma, 4096, 2, 1); err != nil {
		log.Fatal(err)
	}
	for _, d := range []string{llama, gemma} {
		tok, err := tokenizer.Load(d)
		if err != nil {
			log.Fatal(err)
		}
		ids := tok.Encode("the café 日本")
		var toks []string
		for _, id := range ids {
			s, _ := tok.Token(id)
			toks = append(toks, s)
		}
		fmt.Printf("%s: %d tokens %q\n", tok.Scheme(), len(ids), toks)
		fmt.Printf("  decoded %q\n", tok.Decode(ids))
	}
	// Output:
	// byte-level BPE: 13 tokens ["t" "he" "Ġc" "af" "Ã" "©" "Ġ" "æ" "Ĺ" "¥" "æ" "ľ" "¬"]
	//   decoded "the café 日本"
	// SentencePiece-style BPE: 13 tokens ["t" "he" "▁c" "af" "<0xC3>" "<0xA9>" "▁" "<0xE6>" "<0x97>" "<0xA5>" "<0xE6>" "<0x9C>" "<0xAC>"]
	//   decoded "the café 日本"
}
