package toolcall

import "strings"

const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
)

// hermesBlock reads the block s starts with (s begins with openTag) and
// says where it ends and whether it is a call. A JSON string may hold the
// text </tool_call> (arguments that are code or a transcript), so the block
// does not simply end at the first closeTag: when the inside starts with
// '{', the object is followed to its matching '}' (skipping strings), and
// if only whitespace and closeTag come next, the block ends after that
// closeTag. Otherwise (no object, or something else after it) the block
// ends at the first closeTag, and it is text. A block with no end is text
// to the end of the answer.
//
// When the bytes so far cannot decide, done is false: more text may still
// decide either way. final says there is no more text, so done is true.
// sc keeps what earlier calls on the same block (s only grown since) have
// read, so that a stream reads each byte of a block once; Parse passes a
// new one.
func hermesBlock(s string, final bool, sc *blockScan) (end int, call *Call, done bool) {
	fallback := func() (int, *Call, bool) {
		from := max(len(openTag), sc.closeFrom)
		if i := strings.Index(s[from:], closeTag); i >= 0 {
			return from + i + len(closeTag), nil, true
		}
		if final {
			return len(s), nil, true
		}
		// No closeTag starts before this; one may end in the next piece.
		sc.closeFrom = max(from, len(s)-len(closeTag)+1)
		return 0, nil, false
	}
	in := len(openTag)
	for in < len(s) && isSpace(s[in]) {
		in++
	}
	if in == len(s) && !final {
		return 0, nil, false // the object may still start
	}
	if in == len(s) || s[in] != '{' {
		return fallback()
	}
	n, ok := sc.obj.next(s[in:])
	if !ok && !final {
		// Even a closeTag already seen may lie inside a string of an
		// object that is still being written.
		return 0, nil, false
	}
	if !ok {
		return fallback()
	}
	after := in + n
	for after < len(s) && isSpace(s[after]) {
		after++
	}
	rest := s[after:]
	if !strings.HasPrefix(rest, closeTag) {
		if !final && strings.HasPrefix(closeTag, rest) {
			return 0, nil, false // closeTag may still come
		}
		return fallback()
	}
	end = after + len(closeTag)
	if c, ok := callObject([]byte(s[in:in+n]), "arguments", "parameters"); ok {
		return end, &c, true
	}
	return end, nil, true
}

// blockScan is what hermesBlock has read of one block so far.
type blockScan struct {
	obj       objScan // the object inside, from its '{'
	closeFrom int     // no closeTag starts in s before this
}

// parseHermes cuts text into text runs and blocks, then joins the pieces
// that are not calls into the content, trimming whitespace on the side
// of each piece that touches a call. Two stretches of content that a call
// separates are joined by a newline.
func parseHermes(text string) (content string, calls []Call) {
	var b strings.Builder
	afterCall := false
	pending := "" // text since the last call, trimmed on the right if a call follows
	flush := func(trimRight bool) {
		if afterCall {
			pending = strings.TrimLeft(pending, space)
		}
		if trimRight {
			pending = strings.TrimRight(pending, space)
		}
		if pending != "" && afterCall && b.Len() > 0 {
			b.WriteByte('\n') // text on both sides of a call: keep the words apart
		}
		b.WriteString(pending)
		pending = ""
	}
	for rest := text; rest != ""; {
		i := strings.Index(rest, openTag)
		if i < 0 {
			pending += rest
			break
		}
		pending += rest[:i]
		rest = rest[i:]
		end, call, _ := hermesBlock(rest, true, &blockScan{})
		if call != nil {
			flush(true)
			calls = append(calls, *call)
			afterCall = true
		} else {
			pending += rest[:end]
		}
		rest = rest[end:]
	}
	flush(false)
	return b.String(), calls
}
