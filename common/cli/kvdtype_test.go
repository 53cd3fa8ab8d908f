package cli

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/kernels"
)

// TestKVCacheDTypeFlags: -kv-cache-dtype reaches the engine config, -ctk
// and -ctv are taken only together and equal (and equal to
// -kv-cache-dtype when both are given), and a generate runs on a 16-bit
// pool.
func TestKVCacheDTypeFlags(t *testing.T) {
	parse := func(args ...string) (kernels.KVDType, error) {
		var rf runtimeFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		rf.register(fs, Variant{Name: "t"})
		if err := fs.Parse(args); err != nil {
			return 0, err
		}
		c, err := rf.engineConfig(Variant{Name: "t"})
		return c.KVCacheDType, err
	}
	for _, tc := range []struct {
		args []string
		want kernels.KVDType
		err  string
	}{
		{nil, kernels.KVF32, ""},
		{[]string{"-kv-cache-dtype", "bf16"}, kernels.KVBF16, ""},
		{[]string{"--kv-cache-dtype", "float16"}, kernels.KVF16, ""},
		{[]string{"-ctk", "f16", "-ctv", "f16"}, kernels.KVF16, ""},
		{[]string{"-ctk", "bf16", "-ctv", "bf16", "-kv-cache-dtype", "bf16"}, kernels.KVBF16, ""},
		{[]string{"-kv-cache-dtype", "q8_0"}, 0, "want f32, bf16 or f16"},
		{[]string{"-ctk", "bf16"}, 0, "give both"},
		{[]string{"-ctk", "bf16", "-ctv", "f16"}, 0, "one dtype"},
		{[]string{"-ctk", "f16", "-ctv", "f16", "-kv-cache-dtype", "bf16"}, 0, "contradict"},
		{[]string{"-ctk", "q4_0", "-ctv", "q4_0"}, 0, "-ctk: unknown KV cache dtype"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			have, err := parse(tc.args...)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, have)
		})
	}

	dir := smallModel(t, "qwen3")
	code, stdout, stderr := run("generate", "-model", dir, "-prompt", "5,6,7", "-max-tokens", "4", "-ignore-eos", "-kv-cache-dtype", "f16")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"tokens"`)
	code, _, stderr = run("generate", "-model", dir, "-prompt", "5,6,7", "-ctk", "bf16")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "-ctk and -ctv")
}

// TestPreflightCountsTheKVDType: the pool's size check counts two bytes a
// value in a 16-bit pool, and the refusal of a float32 pool says that a
// 16-bit one would halve it.
func TestPreflightCountsTheKVDType(t *testing.T) {
	limit := memoryLimit()
	if limit <= 0 {
		t.Skip("no memory limit on this system")
	}
	mc := &model.Config{NumHiddenLayers: 28, NumKeyValueHeads: 8, HeadDim: 128, MaxPositionEmbeddings: 40960}
	perBlock := int64(2 * 28 * 16 * 1024) // values a block of 16 tokens holds
	var rf runtimeFlags
	rf.eng.BlockSize = 16
	rf.eng.MaxBatchTokens, rf.eng.MaxRunning, rf.eng.ChunkedPrefill = 512, 64, true
	// A pool of 1.5 × the limit in float32: 0.75 × the limit in 16 bits.
	rf.eng.NumBlocks = int(3 * limit / 2 / (4 * perBlock))
	err := rf.preflight(mc)
	require.ErrorContains(t, err, "4 bytes (f32) a token")
	require.ErrorContains(t, err, "-kv-cache-dtype bf16 or f16")
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		rf.eng.KVCacheDType = dt
		require.NoError(t, rf.preflight(mc), "%v", dt)
	}
	rf.eng.NumBlocks *= 3
	err = rf.preflight(mc)
	require.ErrorContains(t, err, "2 bytes (f16) a token")
	require.NotContains(t, err.Error(), "-kv-cache-dtype")
}
