package grammar

import "sync"

// maxRecentGrammars is how many parsed grammars Parse keeps by their text.
// Each holds its position masks (at most maxPositionBytes), which is what
// keeping it is for: a server that receives one JSON schema request after
// request parses it each time, and the second request should find the
// masks the first one made.
const maxRecentGrammars = 8

// recent is the grammars Parse returned last, most recent at the end.
var recent struct {
	mu   sync.Mutex
	list []recentEntry
}

type recentEntry struct {
	src string
	g   *Grammar
}

// recentGrammar returns the grammar parsed from src lately, or nil.
func recentGrammar(src string) *Grammar {
	recent.mu.Lock()
	defer recent.mu.Unlock()
	for i, e := range recent.list {
		if e.src == src {
			copy(recent.list[i:], recent.list[i+1:])
			recent.list[len(recent.list)-1] = e
			return e.g
		}
	}
	return nil
}

// keepGrammar remembers g as the grammar of src, dropping the least
// recently used past maxRecentGrammars.
func keepGrammar(src string, g *Grammar) {
	recent.mu.Lock()
	defer recent.mu.Unlock()
	for _, e := range recent.list {
		if e.src == src {
			return // parsed twice at once: the first one stays
		}
	}
	if len(recent.list) >= maxRecentGrammars {
		copy(recent.list, recent.list[1:])
		recent.list = recent.list[:len(recent.list)-1]
	}
	recent.list = append(recent.list, recentEntry{src, g})
}
