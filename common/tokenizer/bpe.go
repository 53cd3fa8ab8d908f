package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is the model of a BPE tokenizer: the vocabulary and the ranked
// merges, applied to one pre-tokenized piece ("word") at a time. The same
// model serves both schemes: in byte-level BPE every character of a word is
// one of the 256 byte characters, so every character is in the vocabulary;
// in SentencePiece-style BPE a character missing from the vocabulary
// becomes its UTF-8 bytes as <0xNN> tokens (byte fallback) or the unknown
// token.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]merge // (left id, right id) → merge
	ignoreMerges bool             // a word that is a vocabulary entry is taken whole

	byteFallback bool
	byteIDs      [256]int32 // id of "<0xNN>" for byte NN; -1 when the vocab lacks it
	unk          int32      // id of unk_token; -1 when there is none
	fuseUnk      bool       // a run of unknown characters becomes one unk

	mu    sync.Mutex
	cache map[string][]int32
}

// merge is one rule of the merge list: its rank (lower merges first) and
// the id of the token it makes.
type merge struct {
	rank int32
	id   int32
}

// maxCache bounds the word cache; past it the cache starts over, which is
// simpler than LRU and costs only a burst of re-merging.
const maxCache = 1 << 16

// maxCachedWord is the longest word (in bytes) the cache keeps. Byte-level
// words are short, but a SentencePiece-style tokenizer without a splitting
// pre-tokenizer (Gemma-3) sees a whole prompt as one word, which would only
// fill the cache.
const maxCachedWord = 256

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// modelJSON is tokenizer.json's "model" object, for BPE.
type modelJSON struct {
	Vocab                   map[string]int32  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	UnkToken                *string           `json:"unk_token"`
	FuseUnk                 bool              `json:"fuse_unk"`
}

// newBPE checks tokenizer.json's model object and indexes its merges.
func newBPE(raw json.RawMessage) (*bpe, error) {
	var head struct {
		Type   string          `json:"type"`
		Merges json.RawMessage `json:"merges"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if head.Type != "BPE" && !(head.Type == "" && head.Merges != nil) {
		// Checked before the rest is read: a Unigram vocab is a list.
		return nil, fmt.Errorf("model type %q is not supported (only BPE, byte-level or SentencePiece-style)", head.Type)
	}
	var m modelJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("BPE with continuing_subword_prefix or end_of_word_suffix is not supported")
	}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("model has an empty vocab")
	}
	b := &bpe{
		vocab: m.Vocab, merges: make(map[uint64]merge, len(m.Merges)), ignoreMerges: m.IgnoreMerges,
		byteFallback: m.ByteFallback, unk: -1, fuseUnk: m.FuseUnk, cache: map[string][]int32{},
	}
	for i := range b.byteIDs {
		id, ok := m.Vocab[byteToken(byte(i))]
		if !ok {
			id = -1
		}
		b.byteIDs[i] = id
	}
	if m.UnkToken != nil && *m.UnkToken != "" {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocab", *m.UnkToken)
		}
		b.unk = id
	}
	for rank, raw := range m.Merges {
		left, right, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("merge %d: %w", rank, err)
		}
		l, okL := m.Vocab[left]
		r, okR := m.Vocab[right]
		id, okM := m.Vocab[left+right]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("merge %d (%q %q): a part or the result is not in the vocab", rank, left, right)
		}
		k := pairKey(l, r)
		if _, dup := b.merges[k]; !dup { // the first (best-ranked) copy wins
			b.merges[k] = merge{rank: int32(rank), id: id}
		}
	}
	return b, nil
}

// byteToken is the name of byte b's token in a byte-fallback vocabulary:
// "<0x0A>" for a newline, two upper-case hex digits.
func byteToken(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// parseByteToken reads a token named as byteToken names them.
func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(tok[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// parseMerge reads one merge, written "left right" (older files) or
// ["left", "right"] (newer files, which allow spaces inside tokens).
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		l, r, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(r, " ") {
			return "", "", fmt.Errorf("merge %q is not two tokens separated by one space", s)
		}
		return l, r, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("merge %s is neither \"a b\" nor [\"a\", \"b\"]", raw)
	}
	return pair[0], pair[1], nil
}

// encodeWord appends the ids of one pre-tokenized word to out.
func (b *bpe) encodeWord(word string, out []int32) []int32 {
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return append(out, id)
		}
	}
	if len(word) > maxCachedWord {
		return append(out, b.merge(word)...)
	}
	b.mu.Lock()
	ids, ok := b.cache[word]
	b.mu.Unlock()
	if ok {
		return append(out, ids...)
	}
	ids = b.merge(word)
	b.mu.Lock()
	if len(b.cache) >= maxCache {
		clear(b.cache)
	}
	b.cache[word] = ids
	b.mu.Unlock()
	return append(out, ids...)
}

// symbols returns the ids a word starts from before any merge: one per
// character that is in the vocabulary. A character that is not becomes its
// UTF-8 bytes as <0xNN> tokens when the model has byte_fallback (and all of
// them are in the vocabulary), else the unk token (one for a whole run of
// them with fuse_unk), else nothing: a byte-level vocabulary has all 256
// byte characters, so there the case does not arise. A byte that is not
// valid UTF-8 counts as an unknown character of its own, so with byte
// fallback it is kept as that byte.
func (b *bpe) symbols(word string) []int32 {
	syms := make([]int32, 0, utf8.RuneCountInString(word))
	lastUnk := false
	for i := 0; i < len(word); {
		r, size := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+size]
		i += size
		if r != utf8.RuneError || size > 1 {
			if id, ok := b.vocab[ch]; ok {
				syms = append(syms, id)
				lastUnk = false
				continue
			}
		}
		if b.byteFallback && b.hasBytes(ch) {
			for j := 0; j < len(ch); j++ {
				syms = append(syms, b.byteIDs[ch[j]])
			}
			lastUnk = false
			continue
		}
		if b.unk < 0 {
			continue // dropped, as the reference does without an unk_token
		}
		if !(b.fuseUnk && lastUnk) {
			syms = append(syms, b.unk)
		}
		lastUnk = true
	}
	return syms
}

// hasBytes reports whether every byte of ch has a <0xNN> token.
func (b *bpe) hasBytes(ch string) bool {
	for j := 0; j < len(ch); j++ {
		if b.byteIDs[ch[j]] < 0 {
			return false
		}
	}
	return true
}

// merge runs the BPE merges on word: start from its symbols, then
// repeatedly fuse the adjacent pair whose merge ranks best (leftmost on a
// tie) until no adjacent pair has a merge.
//
// The candidate pairs wait in a heap ordered by (rank, position), so a word
// of n symbols costs O(n log n): a SentencePiece-style tokenizer may hand
// it a whole prompt as one word. A heap entry goes stale when either of
// its symbols takes part in another merge first; since a merge always makes
// a longer token, and so a new id, an entry is still good exactly when both
// positions hold the ids it was made for.
func (b *bpe) merge(word string) []int32 {
	syms := b.symbols(word)
	n := len(syms)
	if n < 2 {
		return syms
	}
	next := make([]int32, n) // next live position; -1 at the end
	prev := make([]int32, n) // previous live position; -1 at the start
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	next[n-1] = -1

	var h pairHeap
	push := func(at int32) {
		if at < 0 || next[at] < 0 {
			return
		}
		nx := next[at]
		if m, ok := b.merges[pairKey(syms[at], syms[nx])]; ok {
			h.push(candidate{rank: m.rank, pos: at, left: syms[at], right: syms[nx], id: m.id})
		}
	}
	for i := range n - 1 {
		push(int32(i))
	}
	for h.len() > 0 {
		c := h.pop()
		nx := next[c.pos]
		if syms[c.pos] != c.left || nx < 0 || syms[nx] != c.right {
			continue // stale
		}
		syms[c.pos] = c.id
		syms[nx] = -1
		next[c.pos] = next[nx]
		if next[nx] >= 0 {
			prev[next[nx]] = c.pos
		}
		push(prev[c.pos])
		push(c.pos)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// candidate is a possible merge of the symbols at pos and the next one.
type candidate struct {
	rank, pos       int32
	left, right, id int32
}

// pairHeap is a binary min-heap of candidates by (rank, pos).
type pairHeap struct{ a []candidate }

func (h *pairHeap) len() int { return len(h.a) }

func less(x, y candidate) bool { return x.rank < y.rank || (x.rank == y.rank && x.pos < y.pos) }

func (h *pairHeap) push(c candidate) {
	h.a = append(h.a, c)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(h.a[i], h.a[p]) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *pairHeap) pop() candidate {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && less(h.a[l], h.a[m]) {
			m = l
		}
		if r < last && less(h.a[r], h.a[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}
