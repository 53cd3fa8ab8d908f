package cli

import (
	"flag"
	"fmt"

	"kvlab/kernels"
)

// kvDTypeFlags are -kv-cache-dtype (vLLM's --kv-cache-dtype) and
// llama-server's -ctk and -ctv. llama-server types K and V apart, each
// f16 unless told; this pool holds both in one dtype, so -ctk and -ctv
// come together, equal, and agree with -kv-cache-dtype when it is given
// too. One of them alone would leave the other at llama-server's f16 or at
// this pool's f32, and neither reading is safe to guess.
type kvDTypeFlags struct {
	dtype    *kernels.KVDType // the engine config's field
	set      bool             // -kv-cache-dtype was given
	ctk, ctv string
}

func (f *kvDTypeFlags) register(fs *flag.FlagSet, dtype *kernels.KVDType) {
	f.dtype = dtype
	fs.Func("kv-cache-dtype", "the `dtype` the KV pool holds keys and values in: f32, bf16 or f16 (16 bits: half the memory a token, each value rounded once; see docs/phase07.md) (default f32)", func(s string) error {
		d, err := kernels.ParseKVDType(s)
		if err != nil {
			return err
		}
		*f.dtype, f.set = d, true
		return nil
	})
	fs.StringVar(&f.ctk, "ctk", "", "llama-server's --cache-type-k: with -ctv, equal to it (the pool holds K and V in one dtype); f32, bf16 or f16")
	fs.StringVar(&f.ctv, "ctv", "", "llama-server's --cache-type-v: with -ctk, equal to it; f32, bf16 or f16")
}

// apply folds -ctk and -ctv into the dtype, refusing a pair that differs,
// one without the other, or a pair that contradicts -kv-cache-dtype.
func (f *kvDTypeFlags) apply() error {
	if f.ctk == "" && f.ctv == "" {
		return nil
	}
	if f.ctk == "" || f.ctv == "" {
		return fmt.Errorf("-ctk and -ctv: give both (llama-server defaults the other to f16, this pool to f32), equal, or use -kv-cache-dtype")
	}
	k, err := kernels.ParseKVDType(f.ctk)
	if err != nil {
		return fmt.Errorf("-ctk: %w", err)
	}
	v, err := kernels.ParseKVDType(f.ctv)
	if err != nil {
		return fmt.Errorf("-ctv: %w", err)
	}
	if k != v {
		return fmt.Errorf("-ctk %v -ctv %v: the pool holds K and V in one dtype; give them equal", k, v)
	}
	if f.set && k != *f.dtype {
		return fmt.Errorf("-ctk and -ctv %v contradict -kv-cache-dtype %v", k, *f.dtype)
	}
	*f.dtype = k
	return nil
}
