package toolcall_test

import (
	"fmt"

	"kvlab/common/toolcall"
)

// A Qwen answer: some text, then a call in Hermes' tags. The content is
// the text before the call; the arguments come back compact.
func ExampleParse() {
	answer := "I will look it up.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"
	content, calls := toolcall.Parse(toolcall.Hermes, answer)
	fmt.Printf("content: %q\n", content)
	for _, c := range calls {
		fmt.Println(c.Name, c.Arguments)
	}
	// Output:
	// content: "I will look it up."
	// get_weather {"city":"Paris","days":2}
}
