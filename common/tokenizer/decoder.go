package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// decoderPlan is a tokenizer.json decoder, read into what Decode and
// Stream need: how one token becomes bytes, and what to strip from the
// start of the text.
//
// A byte-level decoder is ByteLevel alone. A SentencePiece-style decoder is
// a Sequence such as Gemma-3's [Replace "▁"→" ", ByteFallback, Fuse] or
// Llama 2's, which ends in Strip " " (start 1) to drop the space its
// normalizer put before the text. Replace and ByteFallback work on one
// token at a time, so they are applied once per vocabulary entry at load
// time (tokenBytes); Fuse joins the tokens, which Decode does anyway; Strip
// after Fuse works on the start of the whole text (strip).
type decoderPlan struct {
	byteLevel    bool
	replace      [][2]string // per token, in order: from, to
	byteFallback bool        // "<0xNN>" decodes to the byte NN
	strip        stripSpec
}

// decoderJSON is the union of the decoder objects this package reads.
type decoderJSON struct {
	Type           string            `json:"type"`
	Decoders       []json.RawMessage `json:"decoders"`
	Pattern        map[string]string `json:"pattern"`
	Content        string            `json:"content"`
	Start          int               `json:"start"`
	Stop           int               `json:"stop"`
	Replacement    string            `json:"replacement"`
	PrependScheme  string            `json:"prepend_scheme"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
}

// parseDecoder reads the decoder of tokenizer.json. Steps whose effect
// cannot be had one token at a time plus a strip at the start (a Replace
// after ByteFallback, whose bytes may only form the pattern once joined;
// a Strip before Fuse, which would strip every token; Strip at the end)
// are refused rather than approximated.
func parseDecoder(raw json.RawMessage) (decoderPlan, error) {
	var p decoderPlan
	if len(raw) == 0 || string(raw) == "null" {
		return p, fmt.Errorf("no decoder (byte-level BPE needs ByteLevel; SentencePiece-style BPE Replace, ByteFallback, Fuse and Strip)")
	}
	var steps []decoderJSON
	var flatten func(raw json.RawMessage) error
	flatten = func(raw json.RawMessage) error {
		var d decoderJSON
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("decoder: %w", err)
		}
		if d.Type != "Sequence" {
			steps = append(steps, d)
			return nil
		}
		for _, sub := range d.Decoders {
			if err := flatten(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := flatten(raw); err != nil {
		return p, err
	}
	fused, other := false, ""
	for _, d := range steps {
		if d.Type != "ByteLevel" {
			other = d.Type
		}
		switch d.Type {
		case "ByteLevel":
			p.byteLevel = true
		case "Replace":
			from, err := replacePattern("decoder", d.Pattern)
			if err != nil {
				return p, err
			}
			if p.byteFallback || fused {
				return p, fmt.Errorf("decoder Replace after ByteFallback or Fuse is not supported")
			}
			p.replace = append(p.replace, [2]string{from, d.Content})
		case "ByteFallback":
			if fused {
				return p, fmt.Errorf("decoder ByteFallback after Fuse is not supported")
			}
			p.byteFallback = true
		case "Fuse":
			fused = true
		case "Strip":
			r, size := utf8.DecodeRuneInString(d.Content)
			switch {
			case size == 0 || size != len(d.Content):
				return p, fmt.Errorf("decoder Strip: content %q is not one character", d.Content)
			case !fused:
				return p, fmt.Errorf("decoder Strip before Fuse (on every token) is not supported")
			case d.Stop != 0:
				return p, fmt.Errorf("decoder Strip with stop %d is not supported (only start)", d.Stop)
			case p.strip.start != 0:
				return p, fmt.Errorf("decoder has two Strip steps")
			}
			p.strip = stripSpec{char: r, start: d.Start}
		case "Metaspace":
			// Older Llama 2 and Mistral files: "▁" → " " in every token,
			// and the space the pre-tokenizer put first dropped. The
			// reference drops it from the first token; dropping it from the
			// start of the text is the same unless that token is empty.
			if utf8.RuneCountInString(d.Replacement) != 1 || p.byteFallback || fused {
				return p, fmt.Errorf("decoder Metaspace: replacement %q must be one character, before ByteFallback and Fuse", d.Replacement)
			}
			p.replace = append(p.replace, [2]string{d.Replacement, " "})
			prepend := d.PrependScheme != prependNever && (d.PrependScheme != "" || d.AddPrefixSpace == nil || *d.AddPrefixSpace)
			if prepend && p.strip.start == 0 {
				p.strip = stripSpec{char: ' ', start: 1}
			}
		default:
			return p, fmt.Errorf("decoder type %q is not supported (only ByteLevel for byte-level BPE; Replace, ByteFallback, Fuse, Strip and Metaspace for SentencePiece-style BPE)", d.Type)
		}
	}
	if p.byteLevel && other != "" {
		return p, fmt.Errorf("decoder type %q does not go with ByteLevel: byte-level BPE decodes with ByteLevel alone", other)
	}
	return p, nil
}

// tokenBytes returns what one SentencePiece-style token decodes to: its
// text with the Replace steps applied ("▁the" → " the"), or the byte NN for
// a "<0xNN>" token under ByteFallback. A byte token may hold a piece of a
// character; the bytes of consecutive tokens are joined before they are
// read as UTF-8, in Decode as in Stream.
func (p decoderPlan) tokenBytes(tok string) []byte {
	for _, r := range p.replace {
		tok = strings.ReplaceAll(tok, r[0], r[1])
	}
	if p.byteFallback {
		if b, ok := parseByteToken(tok); ok {
			return []byte{b}
		}
	}
	return []byte(tok)
}

// stripSpec is a Strip decoder after Fuse: up to start copies of char are
// removed from the start of the decoded text. The zero value strips nothing.
type stripSpec struct {
	char  rune
	start int
}

// apply strips up to n copies of the character from the start of s and
// returns what is left of s and of n: n itself while s is all stripped
// characters (so a stream strips on into the next token), 0 once s holds
// anything else.
func (st stripSpec) apply(s string, n int) (string, int) {
	for n > 0 && s != "" {
		r, size := utf8.DecodeRuneInString(s)
		if r != st.char {
			return s, 0
		}
		s, n = s[size:], n-1
	}
	if s != "" {
		n = 0
	}
	return s, n
}
