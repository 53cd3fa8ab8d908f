package tokenizer

import "unicode/utf8"

// byteToRune and runeToByte are GPT-2's reversible byte-to-character map,
// which every byte-level BPE vocabulary is written in. Bytes that are
// printable Latin-1 characters stand for themselves; the other 68 (controls,
// space, DEL, NBSP, soft hyphen) are shifted to U+0100 and up, in byte order.
// The point is that every vocabulary entry is a printable string with no
// whitespace, so a space byte shows up as "Ġ" (U+0120) and a newline as "Ċ".
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(0x100)
	for b := range 256 {
		r := rune(b)
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if !printable {
			r = next
			next++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// byteLevel returns s with every byte replaced by its character in the
// byte-level alphabet.
func byteLevel(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// unByteLevel maps a vocabulary entry back to the bytes it stands for. An
// entry with a character outside the byte-level alphabet (an added token
// such as "<think>" is fine, "hello world" with a real space is not) is
// taken as its own UTF-8 bytes, as HuggingFace's ByteLevel decoder does.
func unByteLevel(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}
