package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// value is a decoded JSON value that keeps the order of object members,
// because the grammar lists properties in the order the schema gives them.
type value struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys  []string
	vals  []*value // object member values (parallel to keys) or array items
	str   string
	num   json.Number
	truth bool
}

// parseValue decodes one JSON document into a value.
func parseValue(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the schema")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &value{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				child, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if i := v.index(k); i >= 0 {
					v.vals[i] = child // the last duplicate wins, as encoding/json does
					continue
				}
				v.keys = append(v.keys, k)
				v.vals = append(v.vals, child)
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := &value{kind: 'a'}
			for dec.More() {
				child, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, child)
			}
			_, err := dec.Token()
			return v, err
		}
	case string:
		return &value{kind: 's', str: t}, nil
	case json.Number:
		return &value{kind: 'n', num: t}, nil
	case bool:
		return &value{kind: 'b', truth: t}, nil
	case nil:
		return &value{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// index is the position of key k in an object, or -1.
func (v *value) index(k string) int {
	for i, kk := range v.keys {
		if kk == k {
			return i
		}
	}
	return -1
}

// get is member k of an object, or nil.
func (v *value) get(k string) *value {
	if v == nil || v.kind != 'o' {
		return nil
	}
	if i := v.index(k); i >= 0 {
		return v.vals[i]
	}
	return nil
}

// has reports whether an object has member k.
func (v *value) has(k string) bool { return v.get(k) != nil }

// kindName names the JSON type of v for error messages.
func (v *value) kindName() string {
	switch v.kind {
	case 'o':
		return "object"
	case 'a':
		return "array"
	case 's':
		return "string"
	case 'n':
		return "number"
	case 'b':
		return "boolean"
	}
	return "null"
}

// compact is v as compact JSON (members in their order, no HTML escaping),
// the text a const or enum value must appear as.
func (v *value) compact() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *value) write(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quoteJSON(k))
			b.WriteByte(':')
			v.vals[i].write(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, c := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			c.write(b)
		}
		b.WriteByte(']')
	case 's':
		b.WriteString(quoteJSON(v.str))
	case 'n':
		b.WriteString(v.num.String())
	case 'b':
		if v.truth {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	default:
		b.WriteString("null")
	}
}

// quoteJSON is s as a JSON string literal without HTML escaping.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}
