package tokenizer

import (
	"strings"
)

// rewriteInlineIf works around a gap in the Jinja renderer: gonja (v2.9)
// parses an inline if-expression only at the top of an output tag, as in
// {{ a if c else b }}, and fails with "Unbalanced parenthesis" on one in
// parentheses, which Gemma-3's template writes:
//
//	{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
//
// rewriteInlineIf turns every parenthesized (X if C else Y) inside a tag
// into ((C) and [X] or [Y])[0], which gonja parses and which evaluates the
// same way: and/or return one of their operands (as in Python) and only
// evaluate the right one when they must, and a one-item list is always
// true, so the result is X when C is true and Y otherwise. Parentheses of
// a call (f(x if c else y)) and groups with a comma are left alone, and so
// is an inline if without else. ApplyChatTemplate uses the rewritten
// source only when the template as written does not parse.
func rewriteInlineIf(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		open := strings.Index(src[i:], "{")
		if open < 0 || i+open+1 >= len(src) {
			b.WriteString(src[i:])
			break
		}
		open += i
		b.WriteString(src[i:open])
		var closer string
		switch src[open+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			end := strings.Index(src[open+2:], "#}")
			if end < 0 {
				b.WriteString(src[open:])
				return b.String()
			}
			end += open + 4
			b.WriteString(src[open:end]) // a comment, as is
			i = end
			continue
		default:
			b.WriteByte('{')
			i = open + 1
			continue
		}
		end := tagEnd(src, open+2, closer)
		if end < 0 {
			b.WriteString(src[open:])
			break
		}
		b.WriteString(src[open : open+2])
		b.WriteString(rewriteExpr(src[open+2 : end]))
		b.WriteString(closer)
		i = end + 2
	}
	return b.String()
}

// tagEnd returns where closer ends the tag whose body starts at from, not
// counting a closer inside a string literal; -1 if none does.
func tagEnd(src string, from int, closer string) int {
	for i := from; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(src, i) - 1
		case strings.HasPrefix(src[i:], closer):
			return i
		}
	}
	return -1
}

// stringEnd returns the index just past the string literal starting at i.
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(s)
}

// rewriteExpr rewrites the parenthesized inline ifs of a tag's body.
func rewriteExpr(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			e := stringEnd(s, i)
			b.WriteString(s[i:e])
			i = e - 1
		case c == '(' || c == '[' || c == '{':
			e := groupEnd(s, i)
			if e < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			inner := rewriteExpr(s[i+1 : e])
			if c == '(' && !isCall(s[:i]) {
				if x, cond, y, ok := splitInlineIf(inner); ok {
					b.WriteString("((" + cond + ") and [" + x + "] or [" + y + "])[0]")
					i = e
					continue
				}
			}
			b.WriteByte(c)
			b.WriteString(inner)
			b.WriteByte(s[e])
			i = e
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// groupEnd returns the index of the bracket that closes the one at i, or
// -1.
func groupEnd(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\'', '"':
			j = stringEnd(s, j) - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// isCall reports whether a '(' after before opens a call's arguments: it
// follows a name, a closing bracket or a string, not an operator.
func isCall(before string) bool {
	t := strings.TrimRight(before, " \t\r\n")
	if t == "" {
		return false
	}
	c := t[len(t)-1]
	if c == ')' || c == ']' || c == '\'' || c == '"' {
		return true
	}
	if !isNameByte(c) {
		return false
	}
	j := len(t)
	for j > 0 && isNameByte(t[j-1]) {
		j--
	}
	switch t[j:] {
	case "and", "or", "not", "in", "is", "if", "else", "return":
		return false // an operator or keyword, not a function's name
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// splitInlineIf splits "X if C else Y" at its first if and the else after
// it, both outside brackets and strings; ok is false for anything else (no
// if, no else, or a top-level comma).
func splitInlineIf(s string) (x, cond, y string, ok bool) {
	ifAt, elseAt := -1, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			i = stringEnd(s, i) - 1
		case c == '(' || c == '[' || c == '{':
			e := groupEnd(s, i)
			if e < 0 {
				return "", "", "", false
			}
			i = e
		case c == ',':
			return "", "", "", false
		case isNameByte(c) && (i == 0 || !isNameByte(s[i-1])):
			j := i
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			switch w := s[i:j]; {
			case w == "if" && ifAt < 0:
				ifAt = i
			case w == "else" && ifAt >= 0 && elseAt < 0:
				elseAt = i
			}
			i = j - 1
		}
	}
	if ifAt < 0 || elseAt < 0 {
		return "", "", "", false
	}
	x, cond, y = strings.TrimSpace(s[:ifAt]), strings.TrimSpace(s[ifAt+2:elseAt]), strings.TrimSpace(s[elseAt+4:])
	if x == "" || cond == "" || y == "" {
		return "", "", "", false
	}
	if yx, yc, yy, nested := splitInlineIf(y); nested {
		// a if b else c if d else e: the else part is an inline if too.
		y = "((" + yc + ") and [" + yx + "] or [" + yy + "])[0]"
	}
	return x, cond, y, true
}
