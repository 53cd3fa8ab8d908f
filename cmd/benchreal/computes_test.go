package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFlagValue(t *testing.T) {
	assert.Equal(t, "f16", flagValue([]string{"-kv-cache-dtype", "f16"}, "kv-cache-dtype"))
	assert.Equal(t, "bf16", flagValue([]string{"--kv-cache-dtype=bf16"}, "kv-cache-dtype"))
	assert.Equal(t, "q8_0", flagValue([]string{"-ctk", "f16", "--cache-type-k", "q8_0"}, "ctk", "cache-type-k"), "the last one wins")
	assert.Equal(t, "", flagValue([]string{"-ctk"}, "ctk"), "no value after it")
	assert.Equal(t, "", flagValue([]string{"ctk", "f16"}, "ctk"), "not a flag")
	assert.Equal(t, "", flagValue(nil, "ctk"))
}

// TestKVDType: the bounds' KV element size follows each server's own
// default unless its row's arguments change it.
func TestKVDType(t *testing.T) {
	st := testSettings(nil, nil)
	assert.Equal(t, "f32", kvDType(st.serveSide(nil)))
	assert.Equal(t, "f16", kvDType(st.llamaSide(nil)))
	assert.Equal(t, "bf16", kvDType(st.serveSide([]string{"-kv-cache-dtype", "bf16"})))
	assert.Equal(t, "q8_0", kvDType(st.llamaSide([]string{"-ctk", "q8_0", "-ctv", "q8_0"})))
}

func TestServeBF16Dot(t *testing.T) {
	for _, native := range []bool{true, false} {
		assert.Equal(t, native, serveBF16Dot(nil, native), "the default follows the CPU")
		assert.Equal(t, native, serveBF16Dot([]string{"-bf16-dot=off", "-bf16-dot=auto"}, native))
		assert.True(t, serveBF16Dot([]string{"-bf16-dot"}, native))
		assert.True(t, serveBF16Dot([]string{"--bf16-dot=1"}, native))
		assert.False(t, serveBF16Dot([]string{"-bf16-dot=false"}, native))
		assert.False(t, serveBF16Dot([]string{"-bf16-dot", "-bf16-dot=0"}, native))
		assert.Equal(t, native, serveBF16Dot([]string{"-model", "bf16-dot"}, native), "a value, not the flag")
	}
	st := testSettings(nil, nil)
	assert.False(t, multipliesInBF16(st.serveSide([]string{"-bf16-dot"}), "f32", true), "f32 weights")
	assert.True(t, multipliesInBF16(st.llamaSide(nil), "bf16", false))
}
