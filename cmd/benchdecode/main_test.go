package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRun(t *testing.T) {
	// run.c strips the leading space of the piece after its BOS token.
	rate, ids, err := parseRun("17 4000 3 3\n", "achieved tok/s: 812.500000\n")
	require.NoError(t, err)
	assert.Equal(t, 812.5, rate)
	assert.Equal(t, []int32{17, 4000, 3, 3}, ids)

	_, _, err = parseRun("17\n", "Couldn't open file x\n")
	assert.ErrorContains(t, err, "no achieved tok/s")
	_, _, err = parseRun("once upon\n", "achieved tok/s: 1\n")
	assert.ErrorContains(t, err, "not a token id")
}

func TestCommonPrefix(t *testing.T) {
	assert.Equal(t, 2, commonPrefix([]int32{1, 2, 3}, []int32{1, 2, 4}))
	assert.Equal(t, 2, commonPrefix([]int32{1, 2}, []int32{1, 2, 4}))
	assert.Equal(t, 0, commonPrefix(nil, []int32{1}))
}
