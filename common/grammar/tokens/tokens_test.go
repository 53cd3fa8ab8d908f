package tokens

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/grammar"
)

// fakeSource is a vocabulary written out by hand; id 0 is a special token
// whose text would match the grammar if it were text.
type fakeSource []string

func (f fakeSource) VocabSize() int          { return len(f) }
func (f fakeSource) Piece(id int32) []byte   { return []byte(f[id]) }
func (f fakeSource) IsSpecial(id int32) bool { return id == 0 }

var vocab = fakeSource{"ye", "y", "e", "s", "yes", "no", "n", "o", "1", "12", "123", "1234", "é"[:1], "é"[1:], "", " "}

// allowed lists the ids whose bit is set.
func allowed(bits []uint64, n int) []int32 {
	var out []int32
	for i := range n {
		if bits[i/64]&(1<<(i%64)) != 0 {
			out = append(out, int32(i))
		}
	}
	return out
}

// TestConstraintSpeaksTokens: the allowed tokens are exactly those whose
// text continues a sentence (listed here by hand), special and empty
// tokens never; Accept follows the text; a Clone is independent; a bitset
// longer than the vocabulary keeps its extra bits clear.
func TestConstraintSpeaksTokens(t *testing.T) {
	g, err := grammar.Parse(`root ::= "yes" | "no" | [0-9]{1,3} | "é"`)
	require.NoError(t, err)
	v := NewLazy(vocab).Vocab()
	c := New(g, v)
	dst := []uint64{^uint64(0), ^uint64(0)} // an engine vocabulary of 128 rows
	clear(dst)
	assert.Equal(t, []int32{1, 4, 5, 6, 8, 9, 10, 12}, allowed(c.Allowed(dst), 128), "ye? no: id 0 is special")
	assert.Len(t, c.Allowed(dst), 2)
	assert.False(t, c.CanEnd())

	require.True(t, c.Accept(1)) // "y"
	d := c.Clone()
	clear(dst)
	assert.Equal(t, []int32{2}, allowed(c.Allowed(dst), 128), `after "y": only "e"`)
	assert.False(t, c.Accept(3), `"s" after "y"`)
	require.True(t, c.Accept(2))
	require.True(t, c.Accept(3))
	assert.True(t, c.CanEnd())
	clear(dst)
	assert.Empty(t, allowed(c.Allowed(dst), 128))

	clear(dst)
	assert.Equal(t, []int32{2}, allowed(d.Allowed(dst), 128), "the clone is still after \"y\"")
	assert.False(t, d.CanEnd())

	e := New(g, v)
	require.True(t, e.Accept(12), "half of é")
	assert.False(t, e.CanEnd())
	require.True(t, e.Accept(13))
	assert.True(t, e.CanEnd())
	assert.False(t, New(g, v).Accept(14), "an empty token")
	assert.False(t, New(g, v).Accept(0), "a special token")
	assert.False(t, New(g, v).Accept(99), "outside the vocabulary")
}
