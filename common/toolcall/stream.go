package toolcall

import "strings"

// Stream parses an answer as it is generated. Content comes out as soon as
// it can no longer be part of a call; everything else is held back:
//
//   - Llama3 and Generic: a call is the whole answer, so an answer whose
//     first non-space byte is '{' is held until Finish and parsed then;
//     any other answer is content from its first byte.
//   - Hermes: text streams, except a suffix that could still grow into
//     <tool_call>, trailing whitespace (trimmed if a call follows), and a
//     block from <tool_call> until it is decided, which is at its end
//     (a call comes out there) or at Finish.
type Stream struct {
	f   Format
	buf string // text not yet given out

	// Llama3 and Generic
	decided, hold bool

	// Hermes
	inBlock   bool   // buf starts with an open block
	afterCall bool   // the last thing given out was a call: trim leading whitespace
	pendingWS string // trailing whitespace of the content, given out only if text follows
	gaveText  bool   // some content has been given out
}

// NewStream starts parsing an answer in format f.
func NewStream(f Format) *Stream { return &Stream{f: f} }

// Push adds the next generated text and returns the content that is safe
// to show now (never part of a call) and the calls completed by it.
func (s *Stream) Push(text string) (content string, calls []Call) {
	if s.f == Hermes {
		s.buf += text
		return s.hermes(false)
	}
	if s.decided && !s.hold {
		return text, nil
	}
	s.buf += text
	if !s.decided {
		t := strings.TrimLeft(s.buf, space)
		if t == "" {
			return "", nil
		}
		s.decided, s.hold = true, t[0] == '{'
		if !s.hold {
			content, s.buf = s.buf, ""
			return content, nil
		}
	}
	return "", nil
}

// Finish ends the answer: whatever was held back comes out, as content or
// as calls. Push and Finish together give exactly what Parse gives for the
// whole text, however it was cut.
func (s *Stream) Finish() (content string, calls []Call) {
	if s.f == Hermes {
		content, calls = s.hermes(true)
		content += s.pendingWS
		s.pendingWS = ""
		return content, calls
	}
	text := s.buf
	s.buf = ""
	if s.decided && !s.hold {
		return "", nil
	}
	return Parse(s.f, text)
}

// hermes gives out what buf now decides.
func (s *Stream) hermes(final bool) (content string, calls []Call) {
	var out strings.Builder
	for {
		if !s.inBlock {
			i := strings.Index(s.buf, openTag)
			if i < 0 {
				keep := 0
				if !final {
					keep = partialSuffix(s.buf, openTag)
				}
				s.text(&out, s.buf[:len(s.buf)-keep])
				s.buf = s.buf[len(s.buf)-keep:]
				return out.String(), calls
			}
			s.text(&out, s.buf[:i])
			s.buf = s.buf[i:]
			s.inBlock = true
		}
		end, call, done := hermesBlock(s.buf, final)
		if !done {
			return out.String(), calls
		}
		if call != nil {
			s.pendingWS = ""
			calls = append(calls, *call)
			s.afterCall = true
		} else {
			s.text(&out, s.buf[:end])
		}
		s.buf = s.buf[end:]
		s.inBlock = false
	}
}

// text gives out x as content, holding back its trailing whitespace and
// dropping leading whitespace right after a call.
func (s *Stream) text(out *strings.Builder, x string) {
	if s.afterCall {
		x = strings.TrimLeft(x, space)
		if x == "" {
			return
		}
		s.afterCall = false
		if s.gaveText {
			x = "\n" + x
		}
	}
	x = s.pendingWS + x
	body := strings.TrimRight(x, space)
	out.WriteString(body)
	s.gaveText = s.gaveText || body != ""
	s.pendingWS = x[len(body):]
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag: text that may still become tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
