package kvcache_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestPoolDType: a pool holds its KV in the dtype it was given; a block's
// bytes (AppendBlock) are two or four a value and survive a round trip
// through WriteBlockBytes bit for bit; a backend without 16-bit caches is
// refused with an error that says what to do.
func TestPoolDType(t *testing.T) {
	const layers, kvDim, bs = 2, 6, 4
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range kernels.KVDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: layers, KVDim: kvDim, Blocks: 4, BlockSize: bs, DType: dt})
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, dt, p.DType())
			k, _ := p.Layer(1)
			require.Equal(t, dt, cpu.KVDTypeOf(k))
			require.Equal(t, 2*bs*kvDim*dt.Bytes(), p.BlockBytes())

			kv := make([]float32, bs*kvDim)
			vv := make([]float32, bs*kvDim)
			for i := range kv {
				kv[i], vv[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			require.NoError(t, p.WriteBlock(1, 2, kv, vv))
			raw := p.AppendBlock(nil, 1, 2, nil)
			require.Len(t, raw, p.BlockBytes())
			gk, gv := make([]float32, len(kv)), make([]float32, len(vv))
			p.ReadBlock(1, 2, gk, gv)
			for i := range kv {
				require.Equal(t, dt.Round(kv[i]), gk[i], "key %d", i)
				require.Equal(t, dt.Round(vv[i]), gv[i], "value %d", i)
			}
			require.NoError(t, p.WriteBlockBytes(0, 3, raw))
			require.Equal(t, raw, p.AppendBlock(nil, 0, 3, make([]float32, 2*p.BlockSize()*p.KVDim())), "the bytes come back as they went")
			require.ErrorContains(t, p.WriteBlockBytes(0, 3, raw[1:]), "bytes of "+dt.Name())
		})
	}
	noKV16 := struct{ kernels.Backend }{cpu.New()} // hides NewKV
	_, err := kvcache.NewPool(noKV16, kvcache.Config{Layers: 1, KVDim: 1, Blocks: 1, BlockSize: 1, DType: kernels.KVBF16})
	assert.ErrorContains(t, err, "has no bf16 KV cache")
	_, err = kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: 1, BlockSize: 1, DType: 7})
	assert.ErrorContains(t, err, "unknown KV dtype")
}
