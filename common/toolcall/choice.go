package toolcall

import (
	"encoding/json"
	"fmt"
)

// Choice is tool_choice: Mode is "none", "auto", "required" or "function" (then Name).
type Choice struct {
	Mode string
	Name string
}

// ParseChoice reads tool_choice (absent/null = auto when tools are given,
// none when not): a string "none", "auto" or "required", or
// {"type":"function","function":{"name":...}} naming one of tools. Asking
// for a call ("required" or a function) with no tools is an error, since
// no answer could satisfy it.
func ParseChoice(raw json.RawMessage, tools []Tool) (Choice, error) {
	if isNull(raw) {
		if len(tools) == 0 {
			return Choice{Mode: "none"}, nil
		}
		return Choice{Mode: "auto"}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "none", "auto":
			return Choice{Mode: mode}, nil
		case "required":
			if len(tools) == 0 {
				return Choice{}, fmt.Errorf("tool_choice: \"required\" needs at least one tool in tools")
			}
			return Choice{Mode: mode}, nil
		}
		return Choice{}, fmt.Errorf("tool_choice: must be \"none\", \"auto\", \"required\" or a function, not %q", mode)
	}
	obj, err := object(raw, "tool_choice")
	if err != nil {
		return Choice{}, fmt.Errorf("tool_choice: must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	var typ string
	if err := field(obj, "type", &typ, "tool_choice"); err != nil {
		return Choice{}, err
	}
	if typ != "function" {
		return Choice{}, fmt.Errorf("tool_choice.type: must be \"function\", not %q", typ)
	}
	if err := onlyKeys(obj, "tool_choice", "type", "function"); err != nil {
		return Choice{}, err
	}
	fnRaw, ok := obj["function"]
	if !ok {
		return Choice{}, fmt.Errorf("tool_choice.function: missing")
	}
	fn, err := object(fnRaw, "tool_choice.function")
	if err != nil {
		return Choice{}, err
	}
	if err := onlyKeys(fn, "tool_choice.function", "name"); err != nil {
		return Choice{}, err
	}
	var name string
	if err := field(fn, "name", &name, "tool_choice.function"); err != nil {
		return Choice{}, err
	}
	for _, t := range tools {
		if t.Name == name {
			return Choice{Mode: "function", Name: name}, nil
		}
	}
	return Choice{}, fmt.Errorf("tool_choice.function.name: %q is not the name of a tool in tools", name)
}
