// Package toolcall is everything about OpenAI-style tool calls that is not
// HTTP: which format a model writes calls in, the grammar that forces a
// call, and the parser that turns the model's text back into calls, whole
// or while it streams.
package toolcall
