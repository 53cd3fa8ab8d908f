package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

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

// validName is OpenAI's rule for function names. It also keeps a name safe
// to write, unescaped, inside a JSON string and a GBNF literal.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ParseTools reads a request's tools array; an error names the index and
// field (tools[1].function.name). Only function tools exist; a key this
// package does not know (such as "strict") is refused rather than ignored.
func ParseTools(raw json.RawMessage) ([]Tool, error) {
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("tools: must be an array of tools")
	}
	tools := make([]Tool, 0, len(items))
	seen := map[string]bool{}
	for i, item := range items {
		at := fmt.Sprintf("tools[%d]", i)
		obj, err := object(item, at)
		if err != nil {
			return nil, err
		}
		var typ string
		if err := field(obj, "type", &typ, at); err != nil {
			return nil, err
		}
		if typ != "function" {
			return nil, fmt.Errorf("%s.type: must be \"function\", not %q", at, typ)
		}
		fn, ok := obj["function"]
		if !ok {
			return nil, fmt.Errorf("%s.function: missing", at)
		}
		if err := onlyKeys(obj, at, "type", "function"); err != nil {
			return nil, err
		}
		at += ".function"
		f, err := object(fn, at)
		if err != nil {
			return nil, err
		}
		if err := onlyKeys(f, at, "name", "description", "parameters", "strict"); err != nil {
			return nil, err
		}
		// strict asks for arguments that always match the schema; only a
		// grammar gives that, and auto has none, so only false is honest.
		if st, ok := f["strict"]; ok && !isNull(st) && string(bytes.TrimSpace(st)) != "false" {
			return nil, fmt.Errorf("%s.strict: only false is supported", at)
		}
		var t Tool
		if _, ok := f["name"]; !ok {
			return nil, fmt.Errorf("%s.name: missing", at)
		}
		if err := field(f, "name", &t.Name, at); err != nil {
			return nil, err
		}
		if !validName.MatchString(t.Name) {
			return nil, fmt.Errorf("%s.name: %q is not 1 to 64 letters, digits, '_' or '-'", at, t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%s.name: %q is already the name of another tool", at, t.Name)
		}
		seen[t.Name] = true
		if _, ok := f["description"]; ok && !isNull(f["description"]) {
			if err := field(f, "description", &t.Description, at); err != nil {
				return nil, err
			}
		}
		if p, ok := f["parameters"]; ok && !isNull(p) {
			ps, err := object(p, at+".parameters")
			if err != nil {
				return nil, err
			}
			if ty, ok := ps["type"]; ok && !bytes.Equal(bytes.TrimSpace(ty), []byte(`"object"`)) {
				return nil, fmt.Errorf("%s.parameters.type: the arguments are an object, so the type must be \"object\"", at)
			}
			var c bytes.Buffer
			if err := json.Compact(&c, p); err != nil {
				return nil, fmt.Errorf("%s.parameters: %v", at, err)
			}
			t.Parameters = json.RawMessage(c.Bytes())
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// isNull reports an absent or null value.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// object decodes a JSON object's members, or says at is not an object.
func object(raw json.RawMessage, at string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		return nil, fmt.Errorf("%s: must be an object", at)
	}
	return m, nil
}

// field decodes member key of obj into a string, or says at.key is not one.
func field(obj map[string]json.RawMessage, key string, dst *string, at string) error {
	v, ok := obj[key]
	if !ok {
		return fmt.Errorf("%s.%s: missing", at, key)
	}
	if err := json.Unmarshal(v, dst); err != nil || bytes.TrimSpace(v)[0] != '"' {
		return fmt.Errorf("%s.%s: must be a string", at, key)
	}
	return nil
}

// onlyKeys refuses a member not in keys.
func onlyKeys(obj map[string]json.RawMessage, at string, keys ...string) error {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		known := false
		for _, w := range keys {
			known = known || k == w
		}
		if !known {
			return fmt.Errorf("%s.%s: not supported", at, k)
		}
	}
	return nil
}
