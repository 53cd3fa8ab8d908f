package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// /tokenize and /detokenize write their answers as they make them, through
// a 64 KiB buffer, instead of building the whole JSON in memory first: with
// with_pieces, an 8 MiB body of text is millions of entries, and six such
// answers built whole took a server from 140 MB to 2.79 GB. The bytes are
// those json.Encoder would write for the same answer.

const textBuffer = 64 << 10

// writeTokens writes /tokenize's answer: {"tokens":[id, ...]}, or with
// pieces [{"id","piece"}, ...], a piece being the token's text, or its
// bytes as numbers when they are not valid UTF-8 on their own. It stops at
// the first failed write (the client gone, or a write past its deadline).
func (h *Handler) writeTokens(w http.ResponseWriter, ids []int32, withPieces bool) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, textBuffer)
	bw.WriteString(`{"tokens":[`)
	var entry []byte
	for i, id := range ids {
		entry = entry[:0]
		if i > 0 {
			entry = append(entry, ',')
		}
		if !withPieces {
			entry = strconv.AppendInt(entry, int64(id), 10)
		} else {
			entry = append(entry, `{"id":`...)
			entry = strconv.AppendInt(entry, int64(id), 10)
			entry = append(entry, `,"piece":`...)
			if b := h.opts.Tokenizer.Piece(id); utf8.Valid(b) {
				entry = appendJSONString(entry, string(b))
			} else {
				entry = append(entry, '[')
				for j, c := range b {
					if j > 0 {
						entry = append(entry, ',')
					}
					entry = strconv.AppendInt(entry, int64(c), 10)
				}
				entry = append(entry, ']')
			}
			entry = append(entry, '}')
		}
		if _, err := bw.Write(entry); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// writeText writes /detokenize's answer, {"content": text}, text being
// the ids' pieces, special tokens written out, with what is not valid
// UTF-8 replaced as strings.ToValidUTF8(s, "\uFFFD") replaces it
// (piecesText): each run of bad bytes becomes one U+FFFD.
func (h *Handler) writeText(w http.ResponseWriter, ids []int32) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, textBuffer)
	bw.WriteString(`{"content":"`)
	var v validUTF8
	var pending, out []byte
	for _, id := range ids {
		pending = append(pending, h.opts.Tokenizer.Piece(id)...)
		if len(pending) < textBuffer/8 { // escaped, at most 6 bytes each: within the buffer
			continue
		}
		out, pending = v.next(out[:0], pending, false)
		if _, err := bw.Write(jsonStringBody(out)); err != nil {
			return err
		}
	}
	out, _ = v.next(out[:0], pending, true)
	bw.Write(jsonStringBody(out))
	bw.WriteString("\"}\n")
	return bw.Flush()
}

// validUTF8 is strings.ToValidUTF8 over a text that comes in parts.
type validUTF8 struct{ invalid bool } // the last byte out was a replacement

// next appends to out what of in is decided, valid UTF-8 with each run of
// bad bytes replaced by one U+FFFD, and returns the rest of in: a tail that
// could still become a character, unless last.
func (v *validUTF8) next(out, in []byte, last bool) (_, rest []byte) {
	i := 0
	for i < len(in) {
		if !last && !utf8.FullRune(in[i:]) {
			break
		}
		c := in[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			v.invalid = false
			continue
		}
		_, n := utf8.DecodeRune(in[i:])
		if n == 1 {
			if !v.invalid {
				out = append(out, "\uFFFD"...)
			}
			v.invalid = true
			i++
			continue
		}
		out = append(out, in[i:i+n]...)
		v.invalid = false
		i += n
	}
	return out, append(in[:0:0], in[i:]...)
}

// appendJSONString appends s (valid UTF-8) as a JSON string, escaped as
// encoding/json escapes it.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// jsonStringBody is s (valid UTF-8) escaped as in a JSON string, without
// the quotes: what goes between them.
func jsonStringBody(s []byte) []byte {
	b, _ := json.Marshal(string(s))
	return b[1 : len(b)-1]
}
