// Package toolcall: CONTRACT STUB — replaced by the real package.
package toolcall

import "encoding/json"

// Tool is one function tool of a request: OpenAI's
// {"type":"function","function":{"name","description","parameters"}}.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON schema of the arguments object; nil or {} = any object
}

// Call is one tool call parsed from a model's output.
type Call struct {
	Name      string
	Arguments string // the arguments as compact JSON text (an object)
}

// Format is how a model writes a tool call, read off its chat template.
type Format int

const (
	Generic Format = iota // the template does not render tools: a system prompt describes them; JSON {"tool_call":{...}} / {"tool_calls":[...]} / {"response":"..."}
	Llama3                // Llama-3.x: the whole answer is {"name": ..., "parameters": {...}}
	Hermes                // Qwen2.5/Qwen3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, after optional content
)

func (f Format) String() string { panic("stub") }

// Detect reads the format off a chat template's Jinja source.
func Detect(templateSource string) Format { panic("stub") }

// ParseTools reads a request's tools array; an error names the index and field (tools[1].function.name).
func ParseTools(raw json.RawMessage) ([]Tool, error) { panic("stub") }

// Choice is tool_choice: Mode is "none", "auto", "required" or "function" (then Name).
type Choice struct {
	Mode string
	Name string
}

// ParseChoice reads tool_choice (absent/null = auto when tools are given, none when not).
func ParseChoice(raw json.RawMessage, tools []Tool) (Choice, error) { panic("stub") }

// SystemPrompt is the text Generic adds to the system message so a template that cannot render tools still describes them; "" for the other formats.
func SystemPrompt(f Format, tools []Tool, parallel bool) string { panic("stub") }

// Grammar is GBNF that restricts the whole answer to one call (one or more when parallel) of the tools c allows, in format f; "" when c does not constrain (none, auto).
func Grammar(f Format, tools []Tool, c Choice, parallel bool) (string, error) { panic("stub") }

// Parse splits a whole answer into content and calls; text that is not a well-formed call is content.
func Parse(f Format, text string) (content string, calls []Call) { panic("stub") }

// Stream parses an answer as it is generated.
type Stream struct{}

func NewStream(f Format) *Stream { panic("stub") }

// Push adds the next generated text and returns the content that is safe to show now (never part of a call) and the calls completed by it.
func (s *Stream) Push(text string) (content string, calls []Call) { panic("stub") }

// Finish ends the answer: whatever was held back comes out, as content or as calls. Push and Finish together give exactly what Parse gives for the whole text.
func (s *Stream) Finish() (content string, calls []Call) { panic("stub") }
