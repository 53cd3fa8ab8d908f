package jsonschema

import (
	"net/url"
	"strconv"
	"strings"
)

// typeSet is a set of JSON type names; nil means any type.
type typeSet map[string]bool

// produces is the set of JSON types s's grammar can spell (nil: any), so
// that a type beside anyOf, oneOf or $ref can be checked to hold for every
// alternative rather than silently dropped. depth bounds reference chains.
func (c *converter) produces(s *value, depth int) typeSet {
	if s == nil || s.kind != 'o' || depth > 32 {
		return nil
	}
	if t := s.get("type"); t != nil {
		set := typeSet{}
		switch t.kind {
		case 's':
			set[t.str] = true
		case 'a':
			for _, e := range t.vals {
				if e.kind == 's' {
					set[e.str] = true
				}
			}
		}
		return set
	}
	switch {
	case s.has("$ref"):
		r := s.get("$ref")
		if r.kind != 's' || len(r.str) == 0 || r.str[0] != '#' {
			return nil
		}
		return c.produces(c.find(r.str), depth+1)
	case s.has("anyOf") || s.has("oneOf"):
		alts := s.get("oneOf")
		if alts == nil {
			alts = s.get("anyOf")
		}
		set := typeSet{}
		for _, a := range alts.vals {
			sub := c.produces(a, depth+1)
			if sub == nil {
				return nil
			}
			for k := range sub {
				set[k] = true
			}
		}
		return set
	case s.has("const") || s.has("enum"):
		vals := []*value{s.get("const")}
		if s.get("const") == nil {
			vals = s.get("enum").vals
		}
		set := typeSet{}
		for _, v := range vals {
			set[v.kindName()] = true
			if v.kind == 'n' && isIntegral(v.num.String()) {
				set["integer"] = true
			}
		}
		return set
	case s.has("properties") || s.has("additionalProperties") || s.has("allOf"):
		return typeSet{"object": true}
	case s.has("items") || s.has("prefixItems"):
		return typeSet{"array": true}
	case s.has("pattern") || s.has("format"):
		return typeSet{"string": true}
	}
	return nil
}

// within reports whether every type in got is one of want (an integer is a number).
func within(got typeSet, want []string) bool {
	if got == nil {
		return false
	}
	ok := map[string]bool{}
	for _, w := range want {
		ok[w] = true
		if w == "number" {
			ok["integer"] = true
		}
	}
	for g := range got {
		if !ok[g] {
			// a number every value of which is integral fits integer
			if g == "number" && ok["integer"] && got["integer"] {
				continue
			}
			return false
		}
	}
	return true
}

// find is the schema a local reference ("#" and a JSON pointer, which may
// be percent-encoded) names, or nil.
func (c *converter) find(ref string) *value {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	frag := ref[1:]
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	target := c.root
	if frag == "" {
		return target
	}
	if !strings.HasPrefix(frag, "/") {
		return nil
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch target.kind {
		case 'o':
			target = target.get(tok)
		case 'a':
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(target.vals) {
				return nil
			}
			target = target.vals[i]
		default:
			return nil
		}
		if target == nil {
			return nil
		}
	}
	return target
}
