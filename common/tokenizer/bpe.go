package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is the model of a byte-level BPE tokenizer: the vocabulary and the
// ranked merges, applied to one pre-tokenized piece ("word") at a time.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]merge // (left id, right id) → merge
	ignoreMerges bool             // a word that is a vocabulary entry is taken whole

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

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// modelJSON is tokenizer.json's "model" object.
type modelJSON struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int32  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
}

// newBPE checks the model object and indexes its merges.
func newBPE(m modelJSON) (*bpe, error) {
	if m.Type != "BPE" && !(m.Type == "" && m.Merges != nil) {
		return nil, fmt.Errorf("model type %q is not supported (only byte-level BPE)", m.Type)
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("BPE with continuing_subword_prefix or end_of_word_suffix is not supported")
	}
	if m.ByteFallback {
		return nil, fmt.Errorf("BPE with byte_fallback (SentencePiece-style) is not supported, only byte-level BPE")
	}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("model has an empty vocab")
	}
	b := &bpe{vocab: m.Vocab, merges: make(map[uint64]merge, len(m.Merges)), ignoreMerges: m.IgnoreMerges, cache: map[string][]int32{}}
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

// encodeWord appends the ids of one byte-level-mapped word to out.
func (b *bpe) encodeWord(word string, out []int32) []int32 {
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return append(out, id)
		}
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

// merge runs the BPE merges on word: start from one symbol per character,
// then repeatedly fuse the adjacent pair whose merge ranks best (leftmost
// on a tie) until no adjacent pair has a merge. Words are short, so the
// quadratic scan beats a heap in practice and is easy to check.
func (b *bpe) merge(word string) []int32 {
	syms := make([]int32, 0, utf8.RuneCountInString(word))
	for _, r := range word {
		id, ok := b.vocab[string(r)]
		if !ok {
			// Every character of a byte-level word is one of the 256 byte
			// characters; a vocab without one of them drops it, as the
			// reference does when there is no unk_token.
			continue
		}
		syms = append(syms, id)
	}
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := b.merges[pairKey(syms[i], syms[i+1])]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}
