package trie

import "slices"

// Shape is a snapshot of a subtree, for tests and debugging: a node's
// tokens and blocks, and its children ordered by their tokens. The root's
// Shape has no tokens or blocks.
type Shape struct {
	Tokens   []int32
	Blocks   []int32
	Children []Shape
}

// Shape returns a snapshot of the unsalted trie (salted roots are left out).
func (t *Trie) Shape() Shape { return shapeOf(t.root) }

func shapeOf(n *node) Shape {
	s := Shape{Tokens: slices.Clone(n.tokens), Blocks: slices.Clone(n.blocks)}
	for _, c := range n.children {
		s.Children = append(s.Children, shapeOf(c))
	}
	slices.SortFunc(s.Children, func(a, b Shape) int { return slices.Compare(a.Tokens, b.Tokens) })
	return s
}
