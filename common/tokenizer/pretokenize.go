package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// gpt2Pattern is the split ByteLevel applies itself when use_regex is true
// (GPT-2 and its descendants without a Split pre-tokenizer).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// lookaheadTail is the only lookaround the split patterns of GPT-2, Llama 3
// and Qwen use: a whitespace run that leaves its last character to the word
// after it, then any whitespace run. Go's regexp (RE2) has no lookahead, so
// splitter replaces the pair by one group and gives the character back by hand.
const lookaheadTail = `\s+(?!\S)|\s+`

// wsGroup names the group that stands for lookaheadTail in the rewritten pattern.
const wsGroup = "kvlabws"

// unicodeSpace is Unicode's White_Space property as a class body. The
// reference implementation's \s is Unicode-aware; Go's is ASCII only, so
// "\u3000" (ideographic space) would otherwise count as a word character.
const unicodeSpace = `\t\n\v\f\r\x{85}\p{Z}`

// splitter cuts text into pieces at the matches of a pattern, keeping both
// the matches and the text between them (HuggingFace's "Isolated" behavior).
type splitter struct {
	re        *regexp.Regexp
	wsIndex   int // submatch index of wsGroup; -1 when the pattern has no lookahead tail
	rawSource string
}

// newSplitter compiles a pattern written for the reference (Oniguruma)
// regex engine. Lookaround other than lookaheadTail is refused with an error
// rather than approximated, since a wrong split silently changes token ids.
func newSplitter(pattern string) (*splitter, error) {
	rewritten := pattern
	hasTail := false
	if i := strings.Index(pattern, lookaheadTail); i >= 0 {
		end := i + len(lookaheadTail)
		before, after := pattern[:i], pattern[end:]
		if (before == "" || strings.HasSuffix(before, "|")) && (after == "" || strings.HasPrefix(after, "|")) && depth(before) == 0 {
			rewritten = before + `(?P<` + wsGroup + `>\s+)` + after
			hasTail = true
		}
	}
	rewritten, err := unicodeClasses(rewritten)
	if err != nil {
		return nil, fmt.Errorf("split pattern %q: %w", pattern, err)
	}
	re, err := regexp.Compile(rewritten)
	if err != nil {
		return nil, fmt.Errorf("split pattern %q is beyond Go's regexp (only the lookahead idiom %s is rewritten): %w", pattern, lookaheadTail, err)
	}
	s := &splitter{re: re, wsIndex: -1, rawSource: pattern}
	if hasTail {
		s.wsIndex = 2 * re.SubexpIndex(wsGroup)
	}
	return s, nil
}

// depth returns how many groups are open at the end of a pattern prefix.
func depth(p string) int {
	d, inClass := 0, false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			d++
		case c == ')':
			d--
		}
	}
	return d
}

// unicodeClasses rewrites \s and \S to Unicode whitespace classes, inside
// and outside brackets. \S inside brackets has no RE2 spelling and is refused.
func unicodeClasses(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			n := p[i+1]
			i++
			switch {
			case n == 's' && inClass:
				b.WriteString(unicodeSpace)
			case n == 's':
				b.WriteString("[" + unicodeSpace + "]")
			case n == 'S' && inClass:
				return "", fmt.Errorf(`\S inside a character class is not supported`)
			case n == 'S':
				b.WriteString("[^" + unicodeSpace + "]")
			default:
				b.WriteByte(c)
				b.WriteByte(n)
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal, not the end.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// split appends the pieces of text to out.
func (s *splitter) split(text string, out []string) []string {
	pos, from := 0, 0 // pos: start of the pending piece; from: where to search
	for from < len(text) {
		loc := s.re.FindStringSubmatchIndex(text[from:])
		if loc == nil {
			break
		}
		start, end := from+loc[0], from+loc[1]
		if start == end {
			// Empty matches split nothing; look again one character on.
			_, size := utf8.DecodeRuneInString(text[start:])
			from = start + size
			continue
		}
		if s.wsIndex >= 0 && loc[s.wsIndex] >= 0 && end < len(text) {
			// The run stops before a non-space: \s+(?!\S) would have
			// backtracked one character, unless the run is that character
			// alone, which the plain \s+ then takes whole.
			_, size := utf8.DecodeLastRuneInString(text[start:end])
			if end-start > size {
				end -= size
			}
		}
		if start > pos {
			out = append(out, text[pos:start])
		}
		out = append(out, text[start:end])
		pos, from = end, end
	}
	if pos < len(text) {
		out = append(out, text[pos:])
	}
	return out
}

// preStage is one step of pre-tokenization: pieces in, finer pieces out.
type preStage interface {
	apply(pieces []string) []string
}

// splitStage is HuggingFace's Split pre-tokenizer with behavior Isolated.
type splitStage struct{ s *splitter }

func (st splitStage) apply(pieces []string) []string {
	var out []string
	for _, p := range pieces {
		out = st.s.split(p, out)
	}
	return out
}

// byteLevelStage is HuggingFace's ByteLevel pre-tokenizer: an optional
// prefix space, an optional GPT-2 split, then the byte-to-character map.
type byteLevelStage struct {
	addPrefixSpace bool
	s              *splitter // nil when use_regex is false
}

func (st byteLevelStage) apply(pieces []string) []string {
	var out []string
	for _, p := range pieces {
		if st.addPrefixSpace && !strings.HasPrefix(p, " ") {
			p = " " + p
		}
		n := len(out)
		if st.s != nil {
			out = st.s.split(p, out)
		} else {
			out = append(out, p)
		}
		for i := n; i < len(out); i++ {
			out[i] = byteLevel(out[i])
		}
	}
	return out
}

// preTokenizerJSON is the union of the pre_tokenizer objects this package reads.
type preTokenizerJSON struct {
	Type           string             `json:"type"`
	PreTokenizers  []preTokenizerJSON `json:"pretokenizers"`
	Pattern        map[string]string  `json:"pattern"`
	Behavior       string             `json:"behavior"`
	Invert         bool               `json:"invert"`
	AddPrefixSpace bool               `json:"add_prefix_space"`
	UseRegex       *bool              `json:"use_regex"`
}

// parsePreTokenizer builds the stages of a pre_tokenizer and reports
// whether a ByteLevel stage is among them.
func parsePreTokenizer(raw json.RawMessage) ([]preStage, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	var pj preTokenizerJSON
	if err := json.Unmarshal(raw, &pj); err != nil {
		return nil, false, fmt.Errorf("pre_tokenizer: %w", err)
	}
	return buildStages(pj)
}

func buildStages(pj preTokenizerJSON) ([]preStage, bool, error) {
	switch pj.Type {
	case "Sequence":
		var stages []preStage
		byteLvl := false
		for _, sub := range pj.PreTokenizers {
			s, bl, err := buildStages(sub)
			if err != nil {
				return nil, false, err
			}
			stages = append(stages, s...)
			byteLvl = byteLvl || bl
		}
		return stages, byteLvl, nil
	case "Split":
		pat, ok := pj.Pattern["Regex"]
		if !ok {
			str, isStr := pj.Pattern["String"]
			if !isStr {
				return nil, false, fmt.Errorf("pre_tokenizer Split: pattern has neither Regex nor String")
			}
			pat = regexp.QuoteMeta(str)
		}
		if pj.Behavior != "Isolated" || pj.Invert {
			return nil, false, fmt.Errorf("pre_tokenizer Split: behavior %q invert %v is not supported (only Isolated, not inverted)", pj.Behavior, pj.Invert)
		}
		s, err := newSplitter(pat)
		if err != nil {
			return nil, false, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return []preStage{splitStage{s}}, false, nil
	case "ByteLevel":
		st := byteLevelStage{addPrefixSpace: pj.AddPrefixSpace}
		if pj.UseRegex == nil || *pj.UseRegex {
			s, err := newSplitter(gpt2Pattern)
			if err != nil {
				return nil, false, err
			}
			st.s = s
		}
		return []preStage{st}, true, nil
	default:
		return nil, false, fmt.Errorf("pre_tokenizer type %q is not supported (only Sequence, Split and ByteLevel)", pj.Type)
	}
}
