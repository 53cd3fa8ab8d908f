package jsonschema

import (
	"fmt"
	"regexp"
	"strings"
)

var startName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*$`)

// ToGBNFStart converts a JSON schema like ToGBNF, but for use inside a
// bigger grammar: the start rule is called start instead of root and every
// other rule name n becomes start-n, so that the rules of several schemas,
// and the caller's own rules, can share one grammar without clashing. The
// caller writes its own root, which refers to start. start is a letter
// followed by letters, digits and '-'.
func ToGBNFStart(schema []byte, start string) (string, error) {
	if !startName.MatchString(start) {
		return "", fmt.Errorf("jsonschema: start rule name %q is not a letter followed by letters, digits and '-'", start)
	}
	rules, err := convertRules(schema)
	if err != nil {
		return "", err
	}
	rename := func(n string) string {
		if n == "root" {
			return start
		}
		return start + "-" + n
	}
	out := make(map[string]string, len(rules))
	for n, body := range rules {
		out[rename(n)] = renameRefs(body, rename)
	}
	return formatRules(out), nil
}

// renameRefs rewrites the rule references of a rule body, leaving literals
// ("..."), classes ([...]) and repetition counts ({m,n}) as they are.
func renameRefs(body string, rename func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(body) && body[j] != end {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(body))
			b.WriteString(body[i:j])
			i = j
		case c == '{':
			j := strings.IndexByte(body[i:], '}')
			if j < 0 {
				j = len(body) - i - 1
			}
			b.WriteString(body[i : i+j+1])
			i += j + 1
		case isNameByte(c):
			j := i
			for j < len(body) && isNameByte(body[j]) {
				j++
			}
			b.WriteString(rename(body[i:j]))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isNameByte(c byte) bool {
	return c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
