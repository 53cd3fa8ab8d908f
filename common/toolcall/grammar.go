package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"kvlab/common/grammar/jsonschema"
)

// Grammar is GBNF that restricts the whole answer to one call (one or more
// when parallel) of the tools c allows, in format f; "" when c does not
// constrain (none, auto, or the zero Choice: the model may answer in text,
// and Parse finds the calls it writes, if any). "required" allows every tool, "function" only
// the named one.
//
// The arguments follow each tool's parameters schema, converted by
// jsonschema. A tool with no parameters, or {}, takes any object, and a
// schema with no type of its own is made an object, since the arguments
// always are one. A schema the converter refuses is an error naming the
// tool (tools[i].function.parameters) rather than a silent fallback to any
// object: a client that forces a call relies on the arguments matching the
// schema, and the converter refuses only keywords it cannot enforce, so an
// answer that ignored them would break that promise quietly.
//
// The calls are written the way Parse reads them, with one optional space
// between tokens outside the arguments:
//
//	Llama3:  {"name": "f", "parameters": {...}}, parallel: joined by "; "
//	Hermes:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, parallel: joined by "\n"
//	Generic: {"tool_call": {"name": "f", "arguments": {...}}}, parallel also {"tool_calls": [call, ...]}
func Grammar(f Format, tools []Tool, c Choice, parallel bool) (string, error) {
	var allowed []int // indexes into tools
	switch c.Mode {
	case "none", "auto", "":
		return "", nil
	case "required":
		for i := range tools {
			allowed = append(allowed, i)
		}
		if len(allowed) == 0 {
			return "", fmt.Errorf("tool_choice: \"required\" needs at least one tool in tools")
		}
	case "function":
		for i, t := range tools {
			if t.Name == c.Name {
				allowed = append(allowed, i)
			}
		}
		if len(allowed) == 0 {
			return "", fmt.Errorf("tool_choice.function.name: %q is not the name of a tool in tools", c.Name)
		}
	default:
		return "", fmt.Errorf("tool_choice: unknown mode %q", c.Mode)
	}
	argKey := "arguments"
	if f == Llama3 {
		argKey = "parameters"
	}
	var b strings.Builder
	var alts []string
	var argRules strings.Builder
	for _, i := range allowed {
		t := tools[i]
		start := "args" + strconv.Itoa(i)
		rules, err := jsonschema.ToGBNFStart(objectSchema(t.Parameters), start)
		if err != nil {
			return "", fmt.Errorf("tools[%d].function.parameters (%s): %v", i, t.Name, err)
		}
		argRules.WriteString(rules)
		alts = append(alts, fmt.Sprintf(`"\"%s\"" sp "," sp "\"%s\"" sp ":" sp %s`, t.Name, argKey, start))
	}
	switch f {
	case Llama3:
		if parallel {
			b.WriteString("root ::= call (\"; \" call)*\n")
		} else {
			b.WriteString("root ::= call\n")
		}
	case Hermes:
		if parallel {
			b.WriteString("root ::= block (\"\\n\" block)*\n")
		} else {
			b.WriteString("root ::= block\n")
		}
		b.WriteString("block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n")
	default:
		b.WriteString(`root ::= "{" sp "\"tool_call\"" sp ":" sp call sp "}"`)
		if parallel {
			b.WriteString(` | "{" sp "\"tool_calls\"" sp ":" sp "[" sp call (sp "," sp call)* sp "]" sp "}"`)
		}
		b.WriteString("\n")
	}
	b.WriteString(`call ::= "{" sp "\"name\"" sp ":" sp (` + strings.Join(alts, " | ") + `) sp "}"` + "\n")
	b.WriteString("sp ::= \" \"?\n")
	b.WriteString(argRules.String())
	return b.String(), nil
}

// objectSchema is the schema of a tool's arguments: any object when there
// is none, and "type": "object" added when the schema says nothing about
// what kind of value it is.
func objectSchema(params json.RawMessage) []byte {
	p := bytes.Trim(params, space)
	if len(p) == 0 {
		return []byte(`{"type":"object"}`)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return p // the converter says what is wrong with it
	}
	if len(m) == 0 {
		return []byte(`{"type":"object"}`)
	}
	for _, k := range []string{"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"} {
		if _, ok := m[k]; ok {
			return p
		}
	}
	return append([]byte(`{"type":"object",`), bytes.TrimLeft(p[1:], space)...)
}
