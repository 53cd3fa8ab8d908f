package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// space is the whitespace JSON allows between tokens. Parse and Stream trim
// only these bytes, never other Unicode spaces, so that a byte-at-a-time
// stream can decide exactly what Parse decides on the whole text.
const space = " \t\r\n"

func isSpace(c byte) bool { return strings.IndexByte(space, c) >= 0 }

// Parse splits a whole answer into content and calls; text that is not a
// well-formed call is content, as it was written.
//
//   - Llama3: the answer, trimmed, is one or more call objects
//     {"name": ..., "parameters": {...}} ("arguments" is accepted for
//     "parameters"), separated by whitespace with at most one ';'; then
//     content is "". Anything else is content.
//   - Hermes: every <tool_call> ... </tool_call> block whose inside is a
//     call object {"name": ..., "arguments": {...}} is a call; the rest is
//     content, with the whitespace next to a call trimmed. A block that is
//     not a call stays in the content as text. See hermesBlock for where a
//     block ends.
//   - Generic: the answer, trimmed, is one JSON object with one key:
//     "tool_call" (a call object), "tool_calls" (a non-empty list of them)
//     or "response" (a string, which is the content). Anything else is
//     content.
//
// A call object has exactly the keys name (a non-empty string) and the
// arguments (an object); Call.Arguments is that object compacted, its keys
// in the order the model wrote them.
func Parse(f Format, text string) (content string, calls []Call) {
	switch f {
	case Llama3:
		if calls := parseLlama3(text); calls != nil {
			return "", calls
		}
	case Hermes:
		return parseHermes(text)
	default:
		if c, calls, ok := parseGeneric(text); ok {
			return c, calls
		}
	}
	return text, nil
}

// callObject reads a call object whose arguments are under one of argKeys.
func callObject(raw []byte, argKeys ...string) (Call, bool) {
	var m map[string]json.RawMessage
	if t := bytes.Trim(raw, space); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		return Call{}, false
	}
	if len(m) != 2 {
		return Call{}, false
	}
	var c Call
	if n, ok := m["name"]; !ok || bytes.Trim(n, space)[0] != '"' || json.Unmarshal(n, &c.Name) != nil || c.Name == "" {
		return Call{}, false
	}
	for _, k := range argKeys {
		args, ok := m[k]
		if !ok {
			continue
		}
		if args = bytes.Trim(args, space); args[0] != '{' {
			return Call{}, false
		}
		var b bytes.Buffer
		if json.Compact(&b, args) != nil {
			return Call{}, false
		}
		c.Arguments = b.String()
		return c, true
	}
	return Call{}, false
}

// parseLlama3 reads one or more call objects, or returns nil.
func parseLlama3(text string) []Call {
	rest := strings.Trim(text, space)
	var calls []Call
	for {
		if rest == "" || rest[0] != '{' {
			return nil
		}
		end, ok := objectEnd(rest)
		if !ok {
			return nil
		}
		c, ok := callObject([]byte(rest[:end]), "parameters", "arguments")
		if !ok {
			return nil
		}
		calls = append(calls, c)
		rest = strings.TrimLeft(rest[end:], space)
		if rest == "" {
			return calls
		}
		if rest[0] == ';' {
			rest = strings.TrimLeft(rest[1:], space)
		}
	}
}

// parseGeneric reads the Generic reply object; ok is false when text is not one.
func parseGeneric(text string) (content string, calls []Call, ok bool) {
	var m map[string]json.RawMessage
	t := strings.Trim(text, space)
	if t == "" || t[0] != '{' || json.Unmarshal([]byte(t), &m) != nil || len(m) != 1 {
		return "", nil, false
	}
	if r, ok := m["response"]; ok {
		if bytes.Trim(r, space)[0] != '"' || json.Unmarshal(r, &content) != nil {
			return "", nil, false
		}
		return content, nil, true
	}
	if r, ok := m["tool_call"]; ok {
		c, ok := callObject(r, "arguments")
		if !ok {
			return "", nil, false
		}
		return "", []Call{c}, true
	}
	if r, ok := m["tool_calls"]; ok {
		var list []json.RawMessage
		if bytes.Trim(r, space)[0] != '[' || json.Unmarshal(r, &list) != nil || len(list) == 0 {
			return "", nil, false
		}
		for _, item := range list {
			c, ok := callObject(item, "arguments")
			if !ok {
				return "", nil, false
			}
			calls = append(calls, c)
		}
		return "", calls, true
	}
	return "", nil, false
}

// objectEnd finds the end of the JSON object s starts with, by its brackets
// and strings alone (json.Unmarshal judges the rest); ok is false when s
// ends first.
func objectEnd(s string) (end int, ok bool) {
	var o objScan
	return o.next(s)
}

// objScan is objectEnd in steps, for a stream: the object arrives a few
// bytes at a time, and starting over at every piece would read an open
// object once per token, work quadratic in its length (seconds of CPU for
// a long tool call). It keeps where it stopped and reads only new bytes.
type objScan struct {
	i        int  // the next byte of s to read
	depth    int  // brackets open
	inString bool // i is inside a string
	esc      bool // the byte before i was a backslash in a string
	end      int  // the object's end once found, else 0
	read     int  // bytes read in all (TestStreamReadsOnce)
}

// next goes on reading s, which holds the bytes given before (unchanged)
// and maybe more, and returns objectEnd's answer for it.
func (o *objScan) next(s string) (end int, ok bool) {
	if o.end > 0 {
		return o.end, true
	}
	for ; o.i < len(s); o.i++ {
		o.read++
		c := s[o.i]
		switch {
		case o.esc:
			o.esc = false
		case o.inString && c == '\\':
			o.esc = true
		case o.inString:
			o.inString = c != '"'
		case c == '"':
			o.inString = true
		case c == '{' || c == '[':
			o.depth++
		case c == '}' || c == ']':
			o.depth--
			if o.depth == 0 {
				o.i++
				o.end = o.i
				return o.end, true
			}
		}
	}
	return 0, false
}
