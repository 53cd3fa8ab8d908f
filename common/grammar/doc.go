// Package grammar constrains generation to a formal grammar written in
// llama.cpp's GBNF: Parse compiles the grammar, a Matcher follows the bytes
// a model has produced, and Allowed turns a Matcher's state into a bitset
// over a vocabulary, the mask a sampler applies before it picks a token.
//
// # Syntax
//
// Rules are "name ::= alternatives", one per line (a line may continue after
// '|' and anywhere inside parentheses). Alternatives are separated by '|';
// a sequence is literals "..." (escapes \n \r \t \\ \" \xHH \uHHHH
// \UHHHHHHHH), classes [a-z_] and [^...] (with \[ \] \- \^ escapes), '.'
// (any code point), rule names, groups ( ), and the repetitions * + ? {m}
// {m,} {m,n} which apply to the symbol before them (a whole literal). '#'
// starts a comment. The start rule is root. Token matches (<...>) are not
// supported. Parse refuses undefined rules, a missing root, and left
// recursion (a rule that can reach itself without consuming a character,
// including a repetition of something that can match nothing): matching it
// would push forever (llama.cpp refuses left recursion too). A rule
// defined twice is an error rather than a silent replacement.
//
// # Matching: a set of stacks
//
// The Matcher is llama.cpp's design, not an automaton: the grammar is
// compiled to a flat program of positions (one per element of each
// alternative) and the state is the set of parse stacks that are still
// possible, each a list of positions with a character class on top. A code
// point advances every stack whose top class contains it, then expands
// rule references (push each alternative) and alternative ends (pop) until
// each stack again has a class on top, or is empty, which means the input so
// far is a sentence. This was chosen over compiling to a DFA because GBNF
// is context-free (JSON nests), and because the set of stacks is exactly
// what the grammar says at every point, with no subset construction that
// could blow up ahead of time: the cost is paid only on the paths the
// model's bytes take.
//
// Stacks are immutable linked lists, so advancing one shares its tail and
// Clone is a copy of a slice header; identical stacks are merged after each
// step. An ambiguous grammar can still multiply its stacks with every
// character, so the set is capped at MaxStacks: past it Accept refuses the
// bytes, leaves the matcher as it was and Err returns ErrTooManyStacks; the
// caller ends the request with an error rather than let one grammar take
// unbounded memory.
//
// Input is bytes, because byte-level BPE tokens can stop in the middle of a
// UTF-8 sequence: the matcher keeps the partial sequence and checks that
// some stack can still take a code point with that prefix, so a token that
// begins an impossible character is refused at its first byte.
//
// # Masks
//
// NewVocab sorts the vocabulary into a trie (depth-first, with the end of
// each subtree recorded). Allowed walks it keeping one matcher state per
// depth: every trie edge is one byte fed to its parent's state, so tokens
// sharing a prefix share the work, and a byte the grammar refuses skips the
// whole subtree. The states met on the walk are interned with a 256-entry
// transition row each, a DFA built lazily from the stack sets, kept in the
// Matcher from one call to the next (at most 4096 states, then it starts
// over; a Clone starts empty): inside a JSON string nearly every edge leads
// back to the same state, so it costs a table lookup instead of a step of
// every stack, and the next decode step from that state finds its row
// filled. On top of that the Matcher keeps the finished masks of the
// last 32 states it asked for (least recently used out, 1 MiB at most at
// 262144 tokens): inside a string, or any char* loop, the stack set after
// a token is the one before it, so the next mask is a copy of a bitset,
// O(vocab/64), with no walk. The caches are not shared by Clones: each is
// written by every call, and a Clone may be used on another goroutine.
//
// A state met for the first time is put together from position masks,
// which live on the Grammar and are shared by all its matchers, Clones
// and goroutines (position.go): for the top three frames of a stack (its
// key) one walk over the whole trie, with a hidden position standing for
// whatever lies below, sorts every token into those the key accepts on
// its own, those that pop out of it (the rest of the stack decides them)
// and those it refuses. A state's mask is then, over its stacks, the
// union of the first sets and one walk of the whole state over the
// second ones, usually a few thousand tokens instead of all of them. The same JSON
// string rule under a new caller finds its key's masks made; exactness
// is proved per state (a bound on the stacks any token could need), and
// where it cannot be (a UTF-8 sequence half read, more than 16 stacks, an
// ambiguous grammar near MaxStacks, the grammar's 8 MiB of masks spent)
// the whole trie is walked as before. Parse keeps the last 8 grammars by
// their text, so requests that send the same grammar share its masks.
// allowedPlain (Clone and Accept per token) is the plain version the tests
// hold all of them to.
//
// # Bounds
//
// Parse refuses parentheses nested deeper than 256 and grammars whose
// repetitions expand past 2^20 elements; a repetition count is at most
// 65536. Matching is bounded by MaxStacks per code point, so a mask costs
// at most one such step per trie node; a grammar that really keeps
// thousands of stacks alive makes each mask that many times slower, which
// only a time limit on the request bounds.
package grammar
