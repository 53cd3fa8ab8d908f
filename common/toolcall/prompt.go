package toolcall

import (
	"encoding/json"
	"strings"
)

// SystemPrompt is the text Generic adds to the system message so a template
// that cannot render tools still describes them; "" for the other formats
// (their templates render the tools themselves) and when there are no
// tools. It lists each tool as a JSON object with its name, description and
// parameters schema, then the reply format Parse reads: a JSON object with
// "tool_call" (or, when parallel, "tool_calls": a list) to call, or with
// "response" to answer in text.
func SystemPrompt(f Format, tools []Tool, parallel bool) string {
	if f != Generic || len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("You can call the following tools. Each is described by a JSON object with its name, a description and a JSON schema of its arguments:\n\n")
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		desc, _ := json.Marshal(t.Description)
		b.WriteString(`{"name": "` + t.Name + `", "description": ` + string(desc) + `, "parameters": ` + string(params) + "}\n")
	}
	b.WriteString("\nReply with one JSON object and nothing else. To call a tool:\n")
	b.WriteString(`{"tool_call": {"name": "<tool name>", "arguments": {<the arguments, matching the tool's parameters>}}}` + "\n")
	if parallel {
		b.WriteString("To call several tools at once:\n")
		b.WriteString(`{"tool_calls": [{"name": "<tool name>", "arguments": {...}}, {"name": "<tool name>", "arguments": {...}}]}` + "\n")
	}
	b.WriteString("To answer without a tool:\n")
	b.WriteString(`{"response": "<your answer>"}` + "\n")
	return b.String()
}
