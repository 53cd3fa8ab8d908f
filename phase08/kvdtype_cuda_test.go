//go:build cuda || cudaemu

package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestCUDAKVCacheDType runs the engine with the KV pool in bfloat16 and in
// float16 on the CUDA backend: a prefix cache reproduces the GPU's
// uncached run bit for bit, and the GPU's run stays within
// TestCUDAEngineParity's bounds of the CPU backend's with the same pool
// dtype (both store the same rounded bits, so they differ as they do in
// float32). Without a device it skips, unless KVLAB_REQUIRE_GPU=1.
func TestCUDAKVCacheDType(t *testing.T) {
	gpu := needCUDA(t)
	o := modeltest.Options(model.ArchLlama, 3)
	o.DType = "bf16"
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, o))
	cm, err := model.Load(dir, bf16Inputs{cpu.New()})
	require.NoError(t, err)
	defer cm.Close()
	gm, err := model.Load(dir, gpu)
	require.NoError(t, err)
	defer gm.Close()
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		t.Run(dt.String(), func(t *testing.T) {
			base := kvParityRun(t, gm, dt, nil, 40, 16)
			cached := kvParityRun(t, gm, dt, Variants[0].PrefixCache, 40, 16)
			for i := range base {
				requireBitEqual(t, base[i].Result, cached[i].Result, fmt.Sprintf("cuda %v: request %d, %s against uncached", dt, i, Variants[0].Name))
			}
			want := kvParityRun(t, cm, dt, nil, 40, 16)
			var c, g []engine.Result
			for i := range want {
				if slices.Equal(want[i].prompt, base[i].prompt) { // a follow-up to parted answers is another text
					c, g = append(c, want[i].Result), append(g, base[i].Result)
				}
			}
			r := compareBackends(c, g)
			fmt.Printf("kv-cache-dtype %-4v cuda against cpu: greedy tokens equal in %d/%d requests; max logit error (normwise per row) %.2e\n", dt, r.same, r.total, r.maxErr)
			for _, dv := range r.divergences {
				require.LessOrEqual(t, dv.gap, 2*dv.slack, "request %d parts from the CPU at token %d where the CPU's choice was no near-tie", dv.request, dv.pos)
			}
			require.LessOrEqual(t, r.maxErr, logitTolerance)
		})
	}
}
