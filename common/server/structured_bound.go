package server

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxGrammarRepetitions bounds the sum of a grammar's repetition counts
// ({m}, {m,n}: n copies each, m for {m,}). The parser expands x{n} into n
// symbols or rules, so without a bound a few bytes of body
// ("[a]{65536}") cost megabytes, and a body of them gigabytes; llama.cpp
// refuses a single count over 2000. A grammar converted from a schema
// counts too (maxLength, maxItems).
const MaxGrammarRepetitions = 1 << 17

// checkRepetitions sums src's repetition counts, skipping literals,
// character classes and comments, and returns an error naming the line
// and column of the one that passes MaxGrammarRepetitions.
func checkRepetitions(src string) error {
	line, col, total := 1, 1, 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\n':
			line, col = line+1, 0
		case '#':
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case '"', '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			for i+1 < len(src) && src[i+1] != end {
				i++
				col++
				if src[i] == '\\' && i+1 < len(src) {
					i++
					col++
				}
				if src[i] == '\n' {
					line, col = line+1, 0
				}
			}
			i++
			col++
		case '{':
			j := strings.IndexByte(src[i:], '}')
			if j < 0 {
				return nil // the parser says what is wrong
			}
			lo, hi, _ := strings.Cut(strings.ReplaceAll(src[i+1:i+j], " ", ""), ",")
			if hi == "" {
				hi = lo // {m} and {m,}
			}
			if n, err := strconv.Atoi(hi); err == nil && n > 0 {
				total += n
			}
			if total > MaxGrammarRepetitions {
				return fmt.Errorf("line %d, column %d: the grammar's repetitions add up to more than %d copies", line, col, MaxGrammarRepetitions)
			}
		}
		col++
	}
	return nil
}
