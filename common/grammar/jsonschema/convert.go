// Package jsonschema converts a JSON schema to a GBNF grammar the way
// llama.cpp's json-schema-to-grammar does, so that constrained sampling emits
// only documents that the schema accepts.
//
// The rules and their names follow llama.cpp: properties in schema order,
// required ones first, optional ones each skippable, bounded whitespace
// between tokens, builtin rules (string, number, date, uuid, ...) added as
// they are needed. The grammar is meant to be a subset of the schema's
// language, never a superset. It differs from llama.cpp's, mostly where
// llama.cpp's would let through documents the schema refuses:
//
//   - a keyword the grammar would have to ignore is an *Error naming the
//     keyword and its JSON pointer, where llama.cpp drops it silently;
//   - {} is any value (llama.cpp makes it an object);
//   - a date has only its month's days (llama.cpp allows 02-31);
//   - a pattern is matched as its JSON spelling (a quote is \"), an
//     unanchored side may hold any characters, and ^ and $ bind to their
//     own top-level branch, as in ECMAScript;
//   - an extra key beside declared properties is spelled without escapes,
//     so that it cannot spell a declared name;
//   - lengths and counts stop at MaxCount; integers, like llama.cpp's, at 16 digits.
//
// oneOf is converted as anyOf, as llama.cpp does: a document matching two
// branches is refused by the schema but not by the grammar, so oneOf
// branches should not overlap.
package jsonschema

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Error is a schema the converter refuses: Pointer is the JSON pointer of the
// offending keyword (or schema), Keyword its name when there is one.
type Error struct {
	Pointer string
	Keyword string
	Msg     string
}

// Error says where in the schema the problem is and what it is.
func (e *Error) Error() string {
	p := e.Pointer
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("json schema %s: %s", p, e.Msg)
}

// annotations are keywords that do not constrain a document and are skipped.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true,
	"title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
	"definitions": true, "$defs": true,
}

var typeNames = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// converter holds the rules emitted so far, by name.
type converter struct {
	root  *value
	rules map[string]string
	// resolving maps each reference being converted to the value of
	// brackets when its conversion began; brackets counts the objects and
	// arrays the current schema is nested in, so a reference met again at
	// the same count refers to itself before any character (left recursion).
	resolving map[string]int
	brackets  int
}

// ToGBNF converts a JSON schema to GBNF source whose start rule is root.
// A schema outside the supported subset is an *Error.
func ToGBNF(schema []byte) (string, error) {
	rules, err := convertRules(schema)
	if err != nil {
		return "", err
	}
	return formatRules(rules), nil
}

// convertRules converts schema to its rules, by name, with the start rule root.
func convertRules(schema []byte) (map[string]string, error) {
	v, err := parseValue(schema)
	if err != nil {
		return nil, &Error{Msg: "invalid JSON: " + err.Error()}
	}
	c := &converter{root: v, rules: map[string]string{"space": spaceRule}, resolving: map[string]int{}}
	if err := c.run(v); err != nil {
		return nil, err
	}
	return c.rules, nil
}

// formatRules writes rules one a line, sorted by name.
func formatRules(rules map[string]string) string {
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", n, rules[n])
	}
	return b.String()
}

// run converts the top-level schema, turning a refusal into an error.
func (c *converter) run(v *value) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	if v.kind != 'o' && v.kind != 'b' {
		fail("", "", "the schema must be an object or a boolean, not %s", v.kindName())
	}
	name := c.visit(v, "", "")
	if name != "root" {
		c.rules["root"] = name
	}
	return nil
}

// fail refuses the schema at ptr.
func fail(ptr, keyword, format string, args ...any) {
	panic(&Error{Pointer: ptr, Keyword: keyword, Msg: fmt.Sprintf(format, args...)})
}

// at is the JSON pointer of member key under ptr.
func at(ptr, key string) string {
	key = strings.ReplaceAll(key, "~", "~0")
	key = strings.ReplaceAll(key, "/", "~1")
	return ptr + "/" + key
}

var invalidRuleChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// addRule adds body under name (made a valid rule name), or under name
// with a number appended when name already holds another body.
func (c *converter) addRule(name, body string) string {
	esc := invalidRuleChars.ReplaceAllString(name, "-")
	if old, ok := c.rules[esc]; !ok || old == body {
		c.rules[esc] = body
		return esc
	}
	for i := 0; ; i++ {
		key := esc + strconv.Itoa(i)
		if old, ok := c.rules[key]; !ok || old == body {
			c.rules[key] = body
			return key
		}
	}
}

// addBuiltin adds the builtin rule kind under name, with the builtins it
// refers to.
func (c *converter) addBuiltin(name, kind string) string {
	b := builtins[kind]
	n := c.addRule(name, b.body)
	for _, dep := range b.deps {
		if _, ok := c.rules[dep]; !ok {
			c.addBuiltin(dep, dep)
		}
	}
	return n
}

// child names a sub-rule of name.
func child(name, suffix string) string {
	if name == "" {
		return suffix
	}
	return name + "-" + suffix
}

func reserved(name string) bool {
	if name == "root" || name == "dot" {
		return true
	}
	_, ok := builtins[name]
	return ok
}

// formatLiteral is s as a GBNF string literal.
func formatLiteral(s string) string {
	// U+FFFD is written as an escape: raw, it reads like a decoding error.
	r := strings.NewReplacer("\\", `\\`, `"`, `\"`, "\r", `\r`, "\n", `\n`, "\uFFFD", `\uFFFD`)
	return `"` + r.Replace(s) + `"`
}

// used records which keywords of one schema object a rule accounts for.
type used map[string]bool

func (u used) mark(keys ...string) {
	for _, k := range keys {
		u[k] = true
	}
}

// visit emits the rule for schema s (at JSON pointer ptr) and returns its name.
// Every keyword of s must be accounted for by the rule or be an annotation.
func (c *converter) visit(s *value, name, ptr string) string {
	if s.kind == 'b' {
		if !s.truth {
			fail(ptr, "", "the schema false accepts nothing")
		}
		return c.addRule(ruleName(name), c.addBuiltin("value", "value"))
	}
	if s.kind != 'o' {
		fail(ptr, "", "a schema must be an object or a boolean, not %s", s.kindName())
	}
	u := used{}
	rule := c.visitObject(s, name, ptr, u)
	for _, k := range s.keys {
		if u[k] || annotations[k] {
			continue
		}
		if k == "format" {
			f := s.get(k)
			fail(at(ptr, k), k, "format %s is not supported here (date, time, date-time and uuid are, on strings)", f.compact())
		}
		fail(at(ptr, k), k, "keyword %q is not supported here", k)
	}
	return rule
}

func ruleName(name string) string {
	if name == "" {
		return "root"
	}
	if reserved(name) {
		return name + "-"
	}
	return name
}

// schemaType is s's type when it is one name; "" when absent; the list is
// checked and returned when it is an array.
func schemaType(s *value, ptr string) (string, []string) {
	t := s.get("type")
	if t == nil {
		return "", nil
	}
	switch t.kind {
	case 's':
		if !typeNames[t.str] {
			fail(at(ptr, "type"), "type", "unknown type %q", t.str)
		}
		return t.str, nil
	case 'a':
		var list []string
		for i, e := range t.vals {
			if e.kind != 's' || !typeNames[e.str] {
				fail(at(at(ptr, "type"), strconv.Itoa(i)), "type", "unknown type %s", e.compact())
			}
			list = append(list, e.str)
		}
		if len(list) == 0 {
			fail(at(ptr, "type"), "type", "an empty list of types accepts nothing")
		}
		return "", list
	}
	fail(at(ptr, "type"), "type", "type must be a string or an array of strings, not %s", t.kindName())
	return "", nil
}

func (c *converter) visitObject(s *value, name, ptr string, u used) string {
	typ, types := schemaType(s, ptr)
	rn := ruleName(name)
	u.mark("type")
	if typ != "" && typ != "string" {
		u.mark("format") // a format constrains only strings: here it is a note (int32, double, ...)
	}
	switch {
	case s.has("$ref"):
		u.mark("$ref")
		u["type"] = c.typeHolds(s, typ, types)
		return c.addRule(rn, c.resolveRef(s.get("$ref"), at(ptr, "$ref")))
	case s.has("oneOf") || s.has("anyOf"):
		kw := "anyOf"
		if s.has("oneOf") {
			kw = "oneOf"
		}
		u.mark(kw)
		u["type"] = c.typeHolds(s, typ, types)
		alts := s.get(kw)
		if alts.kind != 'a' || len(alts.vals) == 0 {
			fail(at(ptr, kw), kw, "%s must be a non-empty array of schemas", kw)
		}
		return c.addRule(rn, c.union(name, alts.vals, func(i int) string { return at(at(ptr, kw), strconv.Itoa(i)) }))
	case s.has("const"):
		u.mark("const")
		v := s.get("const")
		if !ofType(v, typ, types) {
			fail(at(ptr, "const"), "const", "const %s is not of the schema's type", v.compact())
		}
		return c.addRule(rn, formatLiteral(v.compact()))
	case s.has("enum"):
		u.mark("enum")
		e := s.get("enum")
		if e.kind != 'a' || len(e.vals) == 0 {
			fail(at(ptr, "enum"), "enum", "enum must be a non-empty array")
		}
		var lits []string
		for _, v := range e.vals {
			if ofType(v, typ, types) { // a value of another type can never validate
				lits = append(lits, formatLiteral(v.compact()))
			}
		}
		if len(lits) == 0 {
			fail(at(ptr, "enum"), "enum", "no value of enum is of the schema's type")
		}
		return c.addRule(rn, "("+strings.Join(lits, " | ")+")")
	case types != nil:
		var parts []string
		for i, t := range types {
			cp := &value{kind: 'o', keys: append([]string(nil), s.keys...), vals: append([]*value(nil), s.vals...)}
			cp.vals[cp.index("type")] = &value{kind: 's', str: t}
			sub := used{}
			altName := child(name, strconv.Itoa(i))
			if name == "" {
				altName = "alternative-" + strconv.Itoa(i)
			}
			parts = append(parts, c.visitObject(cp, altName, ptr, sub))
			for k := range sub {
				if sub[k] {
					u[k] = true
				}
			}
		}
		return c.addRule(rn, strings.Join(parts, " | "))
	case (typ == "" || typ == "object") && (s.has("properties") || (s.has("additionalProperties") && !isTrue(s.get("additionalProperties")))):
		u.mark("properties", "required", "additionalProperties")
		props := objectProps(s.get("properties"), at(ptr, "properties"))
		req := requiredSet(s.get("required"), at(ptr, "required"))
		return c.addRule(rn, c.objectRule(props, req, name, s.get("additionalProperties"), ptr))
	case (typ == "" || typ == "object" || typ == "string") && s.has("allOf"):
		u.mark("allOf")
		return c.allOf(s.get("allOf"), name, rn, at(ptr, "allOf"))
	case (typ == "" || typ == "array") && (s.has("items") || s.has("prefixItems")):
		return c.array(s, name, rn, ptr, u)
	case (typ == "" || typ == "string") && s.has("pattern"):
		u.mark("pattern")
		p := s.get("pattern")
		if p.kind != 's' {
			fail(at(ptr, "pattern"), "pattern", "pattern must be a string")
		}
		return c.pattern(p.str, rn, at(ptr, "pattern"))
	case (typ == "" || typ == "string") && s.get("format") != nil && s.get("format").kind == 's' && isUUID(s.get("format").str):
		u.mark("format")
		if rn == "root" {
			return c.addBuiltin("root", "uuid")
		}
		return c.addBuiltin(s.get("format").str, "uuid")
	case (typ == "" || typ == "string") && s.get("format") != nil && s.get("format").kind == 's' && isDateTime(s.get("format").str):
		u.mark("format")
		f := s.get("format").str + "-string"
		return c.addRule(rn, c.addBuiltin(f, f))
	case typ == "string" && (s.has("minLength") || s.has("maxLength")):
		u.mark("minLength", "maxLength")
		lo := count(s.get("minLength"), at(ptr, "minLength"), "minLength", 0)
		hi := count(s.get("maxLength"), at(ptr, "maxLength"), "maxLength", -1)
		if hi >= 0 && lo > hi {
			fail(at(ptr, "minLength"), "minLength", "minLength %d is above maxLength %d", lo, hi)
		}
		ch := c.addBuiltin("char", "char")
		return c.addRule(rn, `"\"" `+repetition(ch, lo, hi, "")+` "\""`)
	case typ == "integer" && (s.has("minimum") || s.has("exclusiveMinimum") || s.has("maximum") || s.has("exclusiveMaximum")):
		u.mark("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
		lo, hi := intBounds(s, ptr)
		return c.addRule(rn, "("+intRange(lo, hi)+")")
	case typ == "object":
		if isTrue(s.get("additionalProperties")) {
			u.mark("additionalProperties")
		}
		return c.addRule(rn, c.addBuiltin("object", "object"))
	case typ == "":
		// No type and nothing that constrains a value: any JSON value, as
		// JSON schema means by {} (llama.cpp makes {} an object).
		return c.addRule(rn, c.addBuiltin("value", "value"))
	}
	if rn == "root" {
		return c.addBuiltin("root", typ)
	}
	return c.addBuiltin(typ, typ)
}

// ofType reports whether v is of type typ, or of one of types, or either is unset.
func ofType(v *value, typ string, types []string) bool {
	if typ == "" && types == nil {
		return true
	}
	for _, t := range append(types, typ) {
		switch {
		case t == v.kindName(),
			t == "integer" && v.kind == 'n' && isIntegral(v.num.String()):
			return true
		case t == "number" && v.kind == 'n':
			return true
		}
	}
	return false
}

// isIntegral reports whether a JSON number has no fractional part.
func isIntegral(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err == nil && f == math.Trunc(f)
}

// typeHolds reports whether a type beside $ref, anyOf or oneOf is
// implied by what those spell, so that leaving it out of the grammar
// changes nothing.
func (c *converter) typeHolds(s *value, typ string, types []string) bool {
	if typ == "" && types == nil {
		return true
	}
	if typ != "" {
		types = []string{typ}
	}
	cp := &value{kind: 'o'}
	for i, k := range s.keys {
		if k != "type" {
			cp.keys = append(cp.keys, k)
			cp.vals = append(cp.vals, s.vals[i])
		}
	}
	return within(c.produces(cp, 0), types)
}

// onlyRef reports whether s is a string $ref and annotations only.
func onlyRef(s *value) bool {
	r := s.get("$ref")
	if r == nil || r.kind != 's' {
		return false
	}
	for _, k := range s.keys {
		if k != "$ref" && !annotations[k] {
			return false
		}
	}
	return true
}

func isTrue(v *value) bool { return v != nil && v.kind == 'b' && v.truth }

var uuidFormat = regexp.MustCompile(`^uuid[1-5]?$`)

func isUUID(f string) bool { return uuidFormat.MatchString(f) }

func isDateTime(f string) bool { return f == "date" || f == "time" || f == "date-time" }

// union is the alternation of the rules of alts.
func (c *converter) union(name string, alts []*value, ptrOf func(int) string) string {
	var parts []string
	for i, a := range alts {
		n := child(name, strconv.Itoa(i))
		if name == "" {
			n = "alternative-" + strconv.Itoa(i)
		}
		parts = append(parts, c.visit(a, n, ptrOf(i)))
	}
	return strings.Join(parts, " | ")
}

// MaxCount is the largest length or item count a grammar spells out: each
// unit of a bound becomes a rule, so a bound is what a schema can cost. A
// larger minimum is refused; a larger maximum is lowered to MaxCount, which
// keeps the grammar inside the schema.
const MaxCount = 4096

// count is a non-negative integer keyword, or def when absent; a maximum
// (def < 0) above MaxCount is MaxCount, a minimum above it an error.
func count(v *value, ptr, kw string, def int) int {
	if v == nil {
		return def
	}
	if v.kind == 'n' {
		f, err := strconv.ParseFloat(v.num.String(), 64)
		if err == nil && f >= 0 && f == math.Trunc(f) {
			switch {
			case f <= MaxCount:
				return int(f)
			case def < 0:
				return MaxCount
			}
			fail(ptr, kw, "%s %s is above %d, the most a grammar spells out", kw, v.compact(), MaxCount)
		}
	}
	fail(ptr, kw, "%s must be a non-negative integer, not %s", kw, v.compact())
	return 0
}

// resolveRef emits the rule for a local reference and returns its name.
func (c *converter) resolveRef(ref *value, ptr string) string {
	if ref.kind != 's' || !strings.HasPrefix(ref.str, "#") {
		fail(ptr, "$ref", "only local references (#/$defs/..., #/definitions/...) are supported, not %s", ref.compact())
	}
	frag := ref.str[1:]
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	name := "ref" + invalidRuleChars.ReplaceAllString(frag, "-")
	if at, ok := c.resolving[ref.str]; ok {
		if at == c.brackets {
			fail(ptr, "$ref", "reference %s refers to itself before any character (left recursion)", ref.compact())
		}
		return name
	}
	if _, ok := c.rules[name]; ok {
		return name
	}
	target := c.find(ref.str)
	if target == nil {
		fail(ptr, "$ref", "reference %s does not resolve", ref.compact())
	}
	seen := map[string]bool{ref.str: true}
	for t := target; t.kind == 'o' && onlyRef(t); {
		r := t.get("$ref")
		if seen[r.str] {
			fail(ptr, "$ref", "reference %s refers only to itself and accepts nothing", ref.compact())
		}
		seen[r.str] = true
		if t = c.find(r.str); t == nil {
			break // the visit reports it
		}
	}
	c.resolving[ref.str] = c.brackets
	n := c.visit(target, name, frag)
	delete(c.resolving, ref.str)
	return n
}

// repetition is item repeated between lo and hi times (hi < 0: no bound),
// with sep between items when sep is not empty.
func repetition(item string, lo, hi int, sep string) string {
	if hi == 0 {
		return ""
	}
	if lo == 0 && hi == 1 {
		return item + "?"
	}
	if sep == "" {
		switch {
		case lo == 1 && hi < 0:
			return item + "+"
		case lo == 0 && hi < 0:
			return item + "*"
		case hi < 0:
			return fmt.Sprintf("%s{%d,}", item, lo)
		}
		return fmt.Sprintf("%s{%d,%d}", item, lo, hi)
	}
	restLo, restHi := lo-1, hi-1
	if restLo < 0 {
		restLo = 0
	}
	if hi < 0 {
		restHi = -1
	}
	res := item + " " + repetition("("+sep+" "+item+")", restLo, restHi, "")
	if lo == 0 {
		return "(" + res + ")?"
	}
	return res
}
