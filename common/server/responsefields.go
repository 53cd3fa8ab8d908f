package server

import (
	"encoding/json"
	"strings"
)

// onlyFields is llama-server's response_fields: of v's JSON object, only
// the values at paths, each a list of keys joined by "/" and written under
// the whole path as its key ("generation_settings/n_predict"); a path that
// leads nowhere is left out. No paths: v as it is.
func onlyFields(v any, paths []string) any {
	if len(paths) == 0 {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var whole any
	if json.Unmarshal(b, &whole) != nil {
		return v
	}
	out := map[string]any{}
	for _, p := range paths {
		cur, ok := whole, true
		for _, k := range strings.Split(p, "/") {
			obj, isObj := cur.(map[string]any)
			if cur, ok = obj[k]; !isObj || !ok {
				ok = false
				break
			}
		}
		if ok {
			out[p] = cur
		}
	}
	return out
}
