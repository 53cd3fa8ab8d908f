package toolcall

import (
	"strconv"
	"strings"
)

// Format is how a model writes a tool call, read off its chat template.
type Format int

const (
	// Generic is for templates that do not render tools: SystemPrompt
	// describes them and the reply format, a JSON object
	// {"tool_call": {...}}, {"tool_calls": [...]} or {"response": "..."}.
	Generic Format = iota
	// Llama3 is Llama-3.1 to 3.3: the whole answer is
	// {"name": ..., "parameters": {...}}.
	Llama3
	// Hermes is Qwen2.5, Qwen3 and Hermes-2/3: after optional content, one
	// or more <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
	Hermes
)

// String is the format's name, as the constants spell it.
func (f Format) String() string {
	switch f {
	case Generic:
		return "Generic"
	case Llama3:
		return "Llama3"
	case Hermes:
		return "Hermes"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Detect reads the format off a chat template's Jinja source, by the text
// the template itself writes when it renders tools:
//
//   - "<tool_call>" anywhere: Hermes (the template teaches the model that tag);
//   - "<|python_tag|>", or "<|start_header_id|>" together with "tools" and
//     "parameters": Llama3 (the Llama-3.1+ templates write the tools as
//     JSON with a "parameters" key into a header block);
//   - anything else, including a template that never mentions tools: Generic.
//
// It is a pure function of the source: the same template always gives the
// same format, whatever the request.
func Detect(templateSource string) Format {
	s := templateSource
	switch {
	case strings.Contains(s, "<tool_call>"):
		return Hermes
	case strings.Contains(s, "<|python_tag|>"),
		strings.Contains(s, "<|start_header_id|>") && strings.Contains(s, "tools") && strings.Contains(s, "parameters"):
		return Llama3
	}
	return Generic
}
