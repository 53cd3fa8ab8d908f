package jsonschema

import (
	"sort"
	"strconv"
	"strings"
)

// prop is one declared property: its name, schema and the pointer of that schema.
type prop struct {
	name   string
	schema *value
	ptr    string
}

// objectProps lists the members of a properties keyword in schema order.
func objectProps(p *value, ptr string) []prop {
	if p == nil {
		return nil
	}
	if p.kind != 'o' {
		fail(ptr, "properties", "properties must be an object")
	}
	var out []prop
	for i, k := range p.keys {
		out = append(out, prop{k, p.vals[i], at(ptr, k)})
	}
	return out
}

// requiredSet is the set of names in a required keyword.
func requiredSet(r *value, ptr string) map[string]bool {
	set := map[string]bool{}
	if r == nil {
		return set
	}
	if r.kind != 'a' {
		fail(ptr, "required", "required must be an array of strings")
	}
	for i, e := range r.vals {
		if e.kind != 's' {
			fail(at(ptr, strconv.Itoa(i)), "required", "required must be an array of strings")
		}
		set[e.str] = true
	}
	return set
}

// objectRule is the body of an object's rule: required properties first in
// schema order, then the optional ones in schema order, each optional one
// possibly skipped, then (when additional is not false) other keys.
func (c *converter) objectRule(props []prop, required map[string]bool, name string, additional *value, ptr string) string {
	c.brackets++
	defer func() { c.brackets-- }()
	kv := map[string]string{}
	var req, opt []string
	for _, p := range props {
		pn := p.name
		if pn == "" {
			pn = "empty-key"
		}
		r := c.visit(p.schema, child(name, pn), p.ptr)
		kv[p.name] = c.addRule(child(name, pn)+"-kv", formatLiteral(quoteJSON(p.name))+` space ":" space `+r)
		if required[p.name] {
			req = append(req, p.name)
		} else {
			opt = append(opt, p.name)
		}
	}
	for r := range required {
		if _, ok := kv[r]; !ok {
			fail(at(ptr, "required"), "required", "required property %q is not among the properties", r)
		}
	}
	const star = "\x00*"
	if additional != nil && !(additional.kind == 'b' && !additional.truth) {
		sub := child(name, "additional")
		var valueRule string
		if additional.kind == 'o' {
			valueRule = c.visit(additional, sub+"-value", at(ptr, "additionalProperties"))
		} else if additional.kind == 'b' {
			valueRule = c.addBuiltin("value", "value")
		} else {
			fail(at(ptr, "additionalProperties"), "additionalProperties", "additionalProperties must be a schema or a boolean")
		}
		var keyRule string
		if len(props) == 0 {
			keyRule = c.addBuiltin("string", "string")
		} else {
			names := make([]string, len(props))
			for i, p := range props {
				names[i] = p.name
			}
			keyRule = c.addRule(sub+"-k", c.notStrings(names))
		}
		kv[star] = c.addRule(sub+"-kv", keyRule+` ":" space `+valueRule)
		opt = append(opt, star)
	}

	var b strings.Builder
	b.WriteString(`"{" space `)
	for i, k := range req {
		if i > 0 {
			b.WriteString(` "," space `)
		}
		b.WriteString(kv[k])
	}
	if len(opt) > 0 {
		b.WriteString(" (")
		if len(req) > 0 {
			b.WriteString(` "," space ( `)
		}
		var alts []string
		for i := range opt {
			alts = append(alts, c.optionalChain(opt[i:], false, name, kv, star))
		}
		b.WriteString(strings.Join(alts, " | "))
		if len(req) > 0 {
			b.WriteString(" )")
		}
		b.WriteString(" )?")
	}
	b.WriteString(` space "}"`)
	return b.String()
}

// optionalChain is the rule for the optional properties ks, in order, any of
// which may be skipped; first says whether ks[0] itself may be skipped. Each
// tail is its own rule so the grammar stays linear in the property count.
func (c *converter) optionalChain(ks []string, first bool, name string, kv map[string]string, star string) string {
	k := ks[0]
	comma := `( "," space ` + kv[k] + ` )`
	var res string
	switch {
	case first && k == star:
		res = comma + "*"
	case first:
		res = comma + "?"
	case k == star:
		res = kv[k] + " " + comma + "*"
	default:
		res = kv[k]
	}
	if len(ks) > 1 {
		kn := k
		if k == star {
			kn = "additional"
		} else if k == "" {
			kn = "empty-key"
		}
		res += " " + c.addRule(child(name, kn)+"-rest", c.optionalChain(ks[1:], true, name, kv, star))
	}
	return res
}

// keyChar is a JSON string character without escapes: keys that must differ
// from the declared names are spelled plainly so that an escape cannot spell
// a declared name.
const keyChar = `[^"\\\x7F\x00-\x1F]`

// notStrings is a JSON string that is none of the given strings.
func (c *converter) notStrings(strs []string) string {
	type node struct {
		kids map[rune]*node
		end  bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, s := range strs {
		n := root
		for _, r := range s {
			k, ok := n.kids[r]
			if !ok {
				k = &node{kids: map[rune]*node{}}
				n.kids[r] = k
			}
			n = k
		}
		n.end = true
	}
	kc := c.addRule("key-char", keyChar)
	var b strings.Builder
	var walk func(n *node)
	walk = func(n *node) {
		var rs []rune
		for r := range n.kids {
			rs = append(rs, r)
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		for i, r := range rs {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString("[" + classChar(r) + "]")
			k := n.kids[r]
			if len(k.kids) > 0 {
				b.WriteString(" (")
				walk(k)
				b.WriteString(")")
			} else if k.end {
				b.WriteString(" " + kc + "+")
			}
		}
		if len(rs) > 0 {
			b.WriteString(` | [^"`)
			for _, r := range rs {
				b.WriteString(classChar(r))
			}
			b.WriteString(`\\\x7F\x00-\x1F] ` + kc + "*")
		}
	}
	b.WriteString(`"\"" ( `)
	walk(root)
	b.WriteString(" )")
	if !root.end {
		b.WriteString("?")
	}
	b.WriteString(` "\""`)
	return b.String()
}

// allOf merges object components into one object rule, as llama.cpp does:
// properties of every component (those of an anyOf inside allOf optional),
// or the intersection of enums when the components are enums.
func (c *converter) allOf(all *value, name, rn, ptr string) string {
	if all.kind != 'a' || len(all.vals) == 0 {
		fail(ptr, "allOf", "allOf must be a non-empty array of schemas")
	}
	var props []prop
	required := map[string]bool{}
	enumCount := map[string]int{}
	var enumOrder []string
	var add func(comp *value, isRequired bool, cptr string, depth int)
	add = func(comp *value, isRequired bool, cptr string, depth int) {
		if depth > 32 {
			fail(at(cptr, "$ref"), "$ref", "$ref chains in allOf nest too deep")
		}
		if comp.kind != 'o' {
			fail(cptr, "allOf", "an allOf component must be an object schema")
		}
		for _, k := range comp.keys {
			switch k {
			case "$ref", "properties", "required", "enum", "type", "additionalProperties":
			default:
				if !annotations[k] {
					fail(at(cptr, k), k, "keyword %q is not supported in an allOf component", k)
				}
			}
		}
		if t := comp.get("type"); t != nil && !(t.kind == 's' && t.str == "object") && !comp.has("enum") {
			fail(at(cptr, "type"), "type", "allOf components must be objects or enums")
		}
		switch {
		case comp.has("$ref"):
			r := comp.get("$ref")
			if r.kind != 's' || !strings.HasPrefix(r.str, "#") {
				fail(at(cptr, "$ref"), "$ref", "only local references are supported")
			}
			tgt, tptr := c.lookup(r.str, at(cptr, "$ref"))
			add(tgt, isRequired, tptr, depth+1)
		case comp.has("properties"):
			for _, p := range objectProps(comp.get("properties"), at(cptr, "properties")) {
				props = append(props, p)
				if isRequired {
					required[p.name] = true
				}
			}
		case comp.has("enum"):
			e := comp.get("enum")
			if e.kind != 'a' {
				fail(at(cptr, "enum"), "enum", "enum must be an array")
			}
			for _, v := range e.vals {
				lit := formatLiteral(v.compact())
				if enumCount[lit] == 0 {
					enumOrder = append(enumOrder, lit)
				}
				enumCount[lit]++
			}
		}
	}
	for i, comp := range all.vals {
		cptr := at(ptr, strconv.Itoa(i))
		if comp.kind == 'o' && comp.has("anyOf") {
			for _, k := range comp.keys {
				if k != "anyOf" && !annotations[k] {
					fail(at(cptr, k), k, "keyword %q is not supported beside anyOf in allOf", k)
				}
			}
			any := comp.get("anyOf")
			if any.kind != 'a' {
				fail(at(cptr, "anyOf"), "anyOf", "anyOf must be an array")
			}
			for j, tt := range any.vals {
				add(tt, false, at(at(cptr, "anyOf"), strconv.Itoa(j)), 0)
			}
			continue
		}
		add(comp, true, cptr, 0)
	}
	if len(enumOrder) > 0 {
		sort.Strings(enumOrder)
		var both []string
		for _, lit := range enumOrder {
			if enumCount[lit] == len(all.vals) {
				both = append(both, lit)
			}
		}
		if len(both) > 0 {
			return c.addRule(rn, "("+strings.Join(both, " | ")+")")
		}
		fail(ptr, "allOf", "the enums of allOf have no value in common")
	}
	return c.addRule(rn, c.objectRule(props, required, name, nil, ptr))
}

// lookup resolves a local reference to its schema and pointer.
func (c *converter) lookup(ref, ptr string) (*value, string) {
	target := c.find(ref)
	if target == nil {
		fail(ptr, "$ref", "reference %q does not resolve", ref)
	}
	return target, ref[1:]
}

// array is the rule of an array schema: a tuple for prefixItems (or an
// items array), else items repeated between minItems and maxItems times.
func (c *converter) array(s *value, name, rn, ptr string, u used) string {
	items := s.get("items")
	tuple := s.get("prefixItems")
	if tuple != nil && tuple.kind != 'a' && items == nil {
		// llama.cpp takes a prefixItems schema (not an array) as items.
		u.mark("prefixItems", "minItems", "maxItems")
		return c.repeated(s, tuple, name, rn, at(ptr, "prefixItems"))
	}
	if tuple != nil {
		u.mark("prefixItems")
		if tuple.kind != 'a' {
			fail(at(ptr, "prefixItems"), "prefixItems", "prefixItems must be an array of schemas")
		}
		tptr := at(ptr, "prefixItems")
		if items != nil {
			if items.kind != 'b' || items.truth {
				fail(at(ptr, "items"), "items", "items beside prefixItems is supported only as false")
			}
			u.mark("items")
		}
		c.tupleCounts(s, len(tuple.vals), ptr, u)
		return c.tuple(tuple.vals, name, rn, tptr)
	}
	u.mark("items")
	if items.kind == 'a' {
		if ai := s.get("additionalItems"); ai != nil {
			if ai.kind != 'b' || ai.truth {
				fail(at(ptr, "additionalItems"), "additionalItems", "additionalItems is supported only as false")
			}
			u.mark("additionalItems")
		}
		c.tupleCounts(s, len(items.vals), ptr, u)
		return c.tuple(items.vals, name, rn, at(ptr, "items"))
	}
	u.mark("minItems", "maxItems")
	return c.repeated(s, items, name, rn, at(ptr, "items"))
}

// repeated is an array of items between minItems and maxItems long.
func (c *converter) repeated(s, items *value, name, rn, itemsPtr string) string {
	c.brackets++
	defer func() { c.brackets-- }()
	ptr := strings.TrimSuffix(strings.TrimSuffix(itemsPtr, "/items"), "/prefixItems")
	itemRule := c.visit(items, child(name, "item"), itemsPtr)
	lo := count(s.get("minItems"), at(ptr, "minItems"), "minItems", 0)
	hi := count(s.get("maxItems"), at(ptr, "maxItems"), "maxItems", -1)
	if hi >= 0 && lo > hi {
		fail(at(ptr, "minItems"), "minItems", "minItems %d is above maxItems %d", lo, hi)
	}
	return c.addRule(rn, `"[" space `+repetition(itemRule, lo, hi, `"," space`)+` space "]"`)
}

// tupleCounts accepts minItems and maxItems beside a tuple of n items when
// the n items the grammar always spells satisfy them (pydantic writes both).
func (c *converter) tupleCounts(s *value, n int, ptr string, u used) {
	if v := s.get("minItems"); v != nil {
		if count(v, at(ptr, "minItems"), "minItems", 0) > n {
			fail(at(ptr, "minItems"), "minItems", "minItems beside a tuple of %d items is supported up to %d", n, n)
		}
		u.mark("minItems")
	}
	if v := s.get("maxItems"); v != nil {
		if count(v, at(ptr, "maxItems"), "maxItems", -1) < n {
			fail(at(ptr, "maxItems"), "maxItems", "maxItems beside a tuple of %d items is supported from %d", n, n)
		}
		u.mark("maxItems")
	}
}

// tuple is an array of exactly the given items, in order.
func (c *converter) tuple(items []*value, name, rn, ptr string) string {
	c.brackets++
	defer func() { c.brackets-- }()
	var parts []string
	for i, it := range items {
		parts = append(parts, c.visit(it, child(name, "tuple-"+strconv.Itoa(i)), at(ptr, strconv.Itoa(i))))
	}
	return c.addRule(rn, `"[" space `+strings.Join(parts, ` "," space `)+` space "]"`)
}
