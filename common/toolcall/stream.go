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
	f Format
	// all is every byte pushed and all.String()[off:] the text not yet
	// given out. A Builder grows by doubling and its String does not
	// copy, where buf += text would copy the held text at every Push:
	// a call held for Finish would cost its length squared.
	all strings.Builder
	off int

	// Llama3 and Generic
	decided, hold bool

	// Hermes
	inBlock   bool            // the held text starts with an open block
	block     blockScan       // what hermesBlock has read of that block
	afterCall bool            // the last thing given out was a call: trim leading whitespace
	pendingWS strings.Builder // trailing whitespace of the content, given out only if text follows
	gaveText  bool            // some content has been given out
}

// held is the text pushed and not yet given out.
func (s *Stream) held() string { return s.all.String()[s.off:] }

// NewStream starts parsing an answer in format f.
func NewStream(f Format) *Stream { return &Stream{f: f} }

// Push adds the next generated text and returns the content that is safe
// to show now (never part of a call) and the calls completed by it.
func (s *Stream) Push(text string) (content string, calls []Call) {
	if s.f == Hermes {
		s.all.WriteString(text)
		return s.hermes(false)
	}
	if s.decided && !s.hold {
		return text, nil
	}
	s.all.WriteString(text)
	if !s.decided {
		t := strings.TrimLeft(s.held(), space)
		if t == "" {
			return "", nil
		}
		s.decided, s.hold = true, t[0] == '{'
		if !s.hold {
			content = s.held()
			s.off += len(content)
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
		content += s.pendingWS.String()
		s.pendingWS.Reset()
		return content, calls
	}
	text := s.held()
	s.off += len(text)
	if s.decided && !s.hold {
		return "", nil
	}
	return Parse(s.f, text)
}

// hermes gives out what buf now decides.
func (s *Stream) hermes(final bool) (content string, calls []Call) {
	var out strings.Builder
	for {
		buf := s.held()
		if !s.inBlock {
			i := strings.Index(buf, openTag)
			if i < 0 {
				keep := 0
				if !final {
					keep = partialSuffix(buf, openTag)
				}
				s.text(&out, buf[:len(buf)-keep])
				s.off += len(buf) - keep
				return out.String(), calls
			}
			s.text(&out, buf[:i])
			s.off += i
			buf = buf[i:]
			s.inBlock, s.block = true, blockScan{}
		}
		end, call, done := hermesBlock(buf, final, &s.block)
		if !done {
			return out.String(), calls
		}
		if call != nil {
			s.pendingWS.Reset()
			calls = append(calls, *call)
			s.afterCall = true
		} else {
			s.text(&out, buf[:end])
		}
		s.off += end
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
	// pendingWS is only whitespace, so the body of pendingWS+x is empty
	// when x's is; whitespace piling up is appended, never copied again.
	body := strings.TrimRight(x, space)
	if body != "" {
		out.WriteString(s.pendingWS.String())
		s.pendingWS.Reset()
		out.WriteString(body)
		s.gaveText = true
	}
	s.pendingWS.WriteString(x[len(body):])
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
