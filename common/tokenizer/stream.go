package tokenizer

import (
	"bytes"
	"unicode/utf8"
)

// Stream decodes ids one at a time for streaming output. A byte-level
// token, or a SentencePiece-style <0xNN> byte token, can end in the middle
// of a character ("é" is two bytes, an emoji four, and each may be split
// across tokens), so Next holds back a trailing incomplete UTF-8 sequence
// until the token that completes it arrives. Where Decode strips a leading
// space (Llama 2's Strip decoder), the stream strips it from the first text
// it returns. The pieces add up to Decode of all the ids.
// A Stream is not safe for concurrent use; use one per request.
type Stream struct {
	t       *Tokenizer
	pending []byte
	strip   int // leading characters still to strip
}

// NewStream returns an incremental decoder.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t, strip: t.strip.start} }

// Next adds id and returns the text that became complete with it, or "" if
// none did. Special tokens add nothing. Bytes that can never be part of a
// valid character come out as U+FFFD.
func (s *Stream) Next(id int32) string {
	s.pending = append(s.pending, s.t.bytesOf(id)...)
	cut := completePrefix(s.pending)
	if cut == 0 {
		return ""
	}
	out := string(bytes.ToValidUTF8(s.pending[:cut], []byte("\uFFFD")))
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	out, s.strip = s.t.strip.apply(out, s.strip)
	return out
}

// Flush returns whatever Next held back (an unfinished character comes
// out as U+FFFD) and resets the stream.
func (s *Stream) Flush() string {
	out := string(bytes.ToValidUTF8(s.pending, []byte("\uFFFD")))
	out, _ = s.t.strip.apply(out, s.strip)
	s.pending = s.pending[:0]
	s.strip = s.t.strip.start
	return out
}

// completePrefix returns the length of b without its last bytes when those
// are the start of a character that more bytes could still complete.
func completePrefix(b []byte) int {
	// A UTF-8 character is at most 4 bytes: look for its first byte among
	// the last 3 (a 4th would make it complete or invalid either way).
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < utf8.RuneSelf {
			return len(b) // ASCII: everything before and including it is final
		}
		if utf8.RuneStart(c) {
			tail := b[len(b)-back:]
			if !utf8.FullRune(tail) && validStart(tail) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}

// validStart reports whether b (not a full rune) can still become a valid
// character, so that bytes which never will are not held back.
func validStart(b []byte) bool {
	// Pad with the smallest continuation bytes that could follow; if the
	// result is one valid rune, b is a real prefix. The exceptions of the
	// second byte (E0 A0.., ED ..9F, F0 90.., F4 ..8F) are covered by trying
	// both ends of the continuation range.
	for _, pad := range []byte{0x80, 0xBF} {
		full := append([]byte(nil), b...)
		for !utf8.FullRune(full) {
			full = append(full, pad)
		}
		if r, size := utf8.DecodeRune(full); r != utf8.RuneError && size == len(full) {
			return true
		}
	}
	return false
}
