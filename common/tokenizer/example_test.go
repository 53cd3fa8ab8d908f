package tokenizer_test

import (
	"fmt"
	"log"

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
