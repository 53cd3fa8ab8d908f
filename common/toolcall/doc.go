// Package toolcall is everything about OpenAI-style tool calls that is not
// HTTP: which format a model writes calls in, the grammar that forces a
// call, and the parser that turns the model's text back into calls, whole
// or while it streams.
//
// # A tool call on the wire
//
// A request lists tools, each a function with a name, a description and a
// JSON schema of its arguments (ParseTools), and says with tool_choice
// whether the model may call them: "none", "auto" (it decides), "required"
// (it must call one) or one named function (ParseChoice). The reply's
// message then carries tool_calls, each a function name and its arguments
// as a JSON string, instead of (or beside) text content. The client runs
// the function and sends the result back in a "tool" message.
//
// The model knows nothing of this protocol. Its chat template renders the
// tools into the prompt, and the model answers in plain text, in whatever
// shape it was trained on; Parse finds the calls in that text.
//
// # Three formats
//
// Detect reads the shape off the chat template's source:
//
//   - Llama3 (Llama-3.1 to 3.3): the whole answer is one JSON object,
//     {"name": "get_weather", "parameters": {"city": "Paris"}}.
//   - Hermes (Qwen2.5, Qwen3, Hermes-2/3): text, then calls wrapped in
//     tags, <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
//   - Generic: every other template, which cannot describe tools at all.
//     SystemPrompt writes the tools and a reply format into the system
//     message: a JSON object {"tool_call": {...}} (or {"tool_calls": [...]})
//     to call, {"response": "..."} to answer.
//
// Whatever Parse cannot read as a well-formed call stays content, as the
// model wrote it: a client sees a malformed call as text rather than lose
// it.
//
// # Auto does not constrain; required does
//
// With "auto" the model may answer in text or call a tool, and nothing
// should push it either way: Grammar returns "" and Parse looks for calls
// afterwards. With "required" or a named function the answer must be a
// call, and asking politely is not enough, so Grammar writes a GBNF
// grammar that admits only calls, in the model's own format, of the
// allowed tools, with arguments that follow each tool's schema (converted
// by the jsonschema package). Constrained sampling then masks every token
// that would leave the grammar: the model cannot write text first, misspell
// the name or drop a required argument. The grammar's answers are the ones
// Parse reads, which the tests check on random answers of every grammar.
//
// # Streaming holds back
//
// A streamed reply sends content as it is generated, but text that will
// turn out to be a call must never be shown as content. Stream gives out
// content only once no later text can make it part of a call: a Hermes
// answer streams until a suffix could still grow into <tool_call>, and from
// an opened tag to its end; a Llama3 or Generic answer that starts with
// '{' might be one big call, so it is held to the end, and any other
// answer streams at once. Calls come out whole when they are decided.
// However the text is cut into pieces, Push and Finish give out exactly
// what Parse gives for the whole text; FuzzStream holds them to that.
package toolcall
