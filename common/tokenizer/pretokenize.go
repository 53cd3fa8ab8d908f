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

// span is a piece of text as the splitter found it: a match of the
// pattern, or the text between two matches.
type span struct {
	text  string
	match bool
}

// spans appends the matches of the pattern in text and the gaps between
// them, in order, to out.
func (s *splitter) spans(text string, out []span) []span {
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
			out = append(out, span{text[pos:start], false})
		}
		out = append(out, span{text[start:end], true})
		pos, from = end, end
	}
	if pos < len(text) {
		out = append(out, span{text[pos:], false})
	}
	return out
}

// split appends the pieces of text to out, each match and each gap a piece
// of its own (HuggingFace's "Isolated" behavior).
func (s *splitter) split(text string, out []string) []string {
	return s.splitAs(text, isolated, out)
}

// splitBehavior is what a Split pre-tokenizer does with the matches.
type splitBehavior int

const (
	isolated           splitBehavior = iota // matches and gaps are pieces of their own
	removed                                 // matches are dropped, gaps kept
	mergedWithPrevious                      // a match ends the piece before it
	mergedWithNext                          // a match starts the piece after it
)

var splitBehaviors = map[string]splitBehavior{
	"Isolated": isolated, "Removed": removed,
	"MergedWithPrevious": mergedWithPrevious, "MergedWithNext": mergedWithNext,
}

// splitAs appends the pieces of text to out as behavior b joins them. As in
// the reference, a match joins its neighbour only if that neighbour is not
// a match itself: "a--b" split at "-" merged with the previous piece is
// "a-", "-", "b".
func (s *splitter) splitAs(text string, b splitBehavior, out []string) []string {
	sp := s.spans(text, nil)
	switch b {
	case isolated:
		for _, p := range sp {
			out = append(out, p.text)
		}
	case removed:
		for _, p := range sp {
			if !p.match {
				out = append(out, p.text)
			}
		}
	case mergedWithPrevious:
		n, prevMatch := len(out), false
		for _, p := range sp {
			if p.match && !prevMatch && len(out) > n {
				out[len(out)-1] += p.text
			} else {
				out = append(out, p.text)
			}
			prevMatch = p.match
		}
	case mergedWithNext:
		for i := 0; i < len(sp); i++ {
			p := sp[i]
			if p.match && i+1 < len(sp) && !sp[i+1].match {
				out = append(out, p.text+sp[i+1].text)
				i++
			} else {
				out = append(out, p.text)
			}
		}
	}
	return out
}

// preStage is one step of pre-tokenization: pieces in, finer pieces out.
// atStart says whether the first piece starts the text Encode was given
// (not only a stretch of it after an added token); Metaspace's
// prepend_scheme "first" needs it.
type preStage interface {
	apply(pieces []string, atStart bool) []string
}

// splitStage is HuggingFace's Split pre-tokenizer.
type splitStage struct {
	s        *splitter
	behavior splitBehavior
}

func (st splitStage) apply(pieces []string, _ bool) []string {
	var out []string
	for _, p := range pieces {
		out = st.s.splitAs(p, st.behavior, out)
	}
	return out
}

// byteLevelStage is HuggingFace's ByteLevel pre-tokenizer: an optional
// prefix space, an optional GPT-2 split, then the byte-to-character map.
type byteLevelStage struct {
	addPrefixSpace bool
	s              *splitter // nil when use_regex is false
}

func (st byteLevelStage) apply(pieces []string, _ bool) []string {
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

// Metaspace's prepend schemes: when to put the replacement character
// before a piece that does not start with it.
const (
	prependAlways = "always" // before every piece
	prependFirst  = "first"  // before the piece that starts the text only
	prependNever  = "never"
)

// metaspaceStage is HuggingFace's Metaspace pre-tokenizer (Llama 2 and
// Mistral files): spaces become the replacement character (U+2581 "▁"),
// the prepend scheme may put one in front, and with split each "▁" starts
// a new piece.
type metaspaceStage struct {
	replacement string
	prepend     string
	split       *splitter // nil: no split
}

func (st metaspaceStage) apply(pieces []string, atStart bool) []string {
	var out []string
	for i, p := range pieces {
		p = strings.ReplaceAll(p, " ", st.replacement)
		if !strings.HasPrefix(p, st.replacement) &&
			(st.prepend == prependAlways || (st.prepend == prependFirst && i == 0 && atStart)) {
			p = st.replacement + p
		}
		if st.split != nil {
			out = st.split.splitAs(p, mergedWithNext, out)
		} else {
			out = append(out, p)
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
	AddPrefixSpace *bool              `json:"add_prefix_space"`
	UseRegex       *bool              `json:"use_regex"`
	Replacement    string             `json:"replacement"`
	PrependScheme  string             `json:"prepend_scheme"`
	Split          *bool              `json:"split"`
}

// preKind records which scheme-defining pre-tokenizers a pipeline holds.
type preKind struct{ byteLevel, metaspace bool }

// parsePreTokenizer builds the stages of a pre_tokenizer and reports
// whether ByteLevel and Metaspace stages are among them.
func parsePreTokenizer(raw json.RawMessage) ([]preStage, preKind, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, preKind{}, nil
	}
	var pj preTokenizerJSON
	if err := json.Unmarshal(raw, &pj); err != nil {
		return nil, preKind{}, fmt.Errorf("pre_tokenizer: %w", err)
	}
	var kind preKind
	stages, err := buildStages(pj, &kind)
	if err == nil && kind.byteLevel && kind.metaspace {
		err = fmt.Errorf("pre_tokenizer has both ByteLevel and Metaspace steps, which belong to different schemes")
	}
	return stages, kind, err
}

func buildStages(pj preTokenizerJSON, kind *preKind) ([]preStage, error) {
	switch pj.Type {
	case "Sequence":
		var stages []preStage
		for _, sub := range pj.PreTokenizers {
			s, err := buildStages(sub, kind)
			if err != nil {
				return nil, err
			}
			stages = append(stages, s...)
		}
		return stages, nil
	case "Split":
		pat, ok := pj.Pattern["Regex"]
		if !ok {
			str, isStr := pj.Pattern["String"]
			if !isStr {
				return nil, fmt.Errorf("pre_tokenizer Split: pattern has neither Regex nor String")
			}
			pat = regexp.QuoteMeta(str)
		}
		b, ok := splitBehaviors[pj.Behavior]
		if !ok || pj.Invert {
			return nil, fmt.Errorf("pre_tokenizer Split: behavior %q invert %v is not supported (only Isolated, Removed, MergedWithPrevious and MergedWithNext, not inverted)", pj.Behavior, pj.Invert)
		}
		s, err := newSplitter(pat)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return []preStage{splitStage{s, b}}, nil
	case "ByteLevel":
		kind.byteLevel = true
		st := byteLevelStage{addPrefixSpace: pj.AddPrefixSpace != nil && *pj.AddPrefixSpace}
		if pj.UseRegex == nil || *pj.UseRegex {
			s, err := newSplitter(gpt2Pattern)
			if err != nil {
				return nil, err
			}
			st.s = s
		}
		return []preStage{st}, nil
	case "Metaspace":
		kind.metaspace = true
		st := metaspaceStage{replacement: pj.Replacement, prepend: pj.PrependScheme}
		if utf8.RuneCountInString(st.replacement) != 1 {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: replacement %q is not one character", pj.Replacement)
		}
		if st.prepend == "" {
			// Files older than prepend_scheme say add_prefix_space.
			st.prepend = prependAlways
			if pj.AddPrefixSpace != nil && !*pj.AddPrefixSpace {
				st.prepend = prependNever
			}
		}
		if st.prepend != prependAlways && st.prepend != prependFirst && st.prepend != prependNever {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: prepend_scheme %q is not always, first or never", pj.PrependScheme)
		}
		if pj.Split == nil || *pj.Split {
			s, err := newSplitter(regexp.QuoteMeta(st.replacement))
			if err != nil {
				return nil, err
			}
			st.split = s
		}
		return []preStage{st}, nil
	default:
		return nil, fmt.Errorf("pre_tokenizer type %q is not supported (only Sequence, Split, ByteLevel and Metaspace)", pj.Type)
	}
}
