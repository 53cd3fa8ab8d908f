//go:build cuda || cudaemu

package cuda

import (
	"bytes"
	"embed"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ptxFiles holds the PTX that `make kernels` generates from src/*.cu.
// PTX is the GPU's portable assembly: the driver compiles
// it for the actual GPU when a module is loaded (and caches the result), so
// the binary carries no nvcc output tied to one GPU generation.
//
//go:embed ptx/*.ptx
var ptxFiles embed.FS

// functions holds every kernel the backend launches; a kernelFn is a loaded
// CUDA function (driver_cu.go) or an emulated one (driver_emu.go).
type functions struct {
	add, siluMul                      kernelFn
	geluTanhMul, softCap, scale       kernelFn
	rmsnorm, rmsnormHeads, rope       kernelFn
	gatherRows, writeKV, copyBlock    kernelFn
	softmax, argmax                   kernelFn
	matmul128, matmul64, matmulSkinny kernelFn
	matmulW128, matmulW64, matmulWSk  kernelFn // the same with a bf16 weight
	matmulSumSlices                   kernelFn
	gatherRowsBF16                    kernelFn
	attention                         [len(attnHeadDims)]kernelFn
	attentionMerge                    kernelFn
	// The same over a cache held in 16 bits (NewKV).
	writeKVBF16, writeKVF16, copyBlock16 kernelFn
	attentionBF16, attentionF16          [len(attnHeadDims)]kernelFn
}

// matmulStages and matmulShared mirror MM_STAGES and MM_SHARED in
// src/matmul.cu: the dynamic shared memory of the tiled kernel with bm-row
// tiles and wBytes-byte weights (MM_STAGES chunks of bm rows of 32 floats
// and 128 rows of 32 weights, then the bf16 tiles of bm + 128 rows of 40).
// The emulator aborts a kernel that needs more than its launch gave.
const matmulStages = 2

func matmulShared(bm, wBytes int) int {
	return matmulStages*(bm*32*4+128*32*wBytes) + (bm+128)*40*2
}

// setShared records the dynamic shared memory of the kernels that use it;
// every other kernel launches with none.
func (f *functions) setShared() {
	f.matmul128.shared = matmulShared(128, 4)
	f.matmul64.shared = matmulShared(64, 4)
	f.matmulW128.shared = matmulShared(128, 2)
	f.matmulW64.shared = matmulShared(64, 2)
}

// bigShared lists the kernels that need more than the 48 KB of shared
// memory a kernel gets without opting in.
func (f *functions) bigShared() []*kernelFn {
	return []*kernelFn{&f.matmul128, &f.matmul64, &f.matmulW128, &f.matmulW64}
}

// attnHeadDims are the head-dimension limits of the attention kernel's
// instantiations (paged_attention_dN handles head_dim <= N).
var attnHeadDims = [...]int{32, 64, 128, 256}

// entries maps each PTX module (file name without .ptx) to its kernels and
// where to keep them.
func (f *functions) entries() map[string]map[string]*kernelFn {
	e := map[string]map[string]*kernelFn{
		"add":      {"add": &f.add},
		"silu_mul": {"silu_mul": &f.siluMul},
		"gemma": {
			"gelu_tanh_mul": &f.geluTanhMul,
			"soft_cap":      &f.softCap,
			"scale":         &f.scale,
		},
		"rmsnorm":       {"rmsnorm": &f.rmsnorm},
		"rmsnorm_heads": {"rmsnorm_heads": &f.rmsnormHeads},
		"rope":          {"rope": &f.rope},
		"gather_rows":   {"gather_rows": &f.gatherRows, "gather_rows_bf16": &f.gatherRowsBF16},
		"write_kv":      {"write_kv": &f.writeKV, "write_kv_bf16": &f.writeKVBF16, "write_kv_f16": &f.writeKVF16},
		"copy_block":    {"copy_block": &f.copyBlock, "copy_block16": &f.copyBlock16},
		"softmax":       {"softmax_rows": &f.softmax},
		"argmax":        {"argmax_rows": &f.argmax},
		"matmul": {
			"matmul_bf16_128":     &f.matmul128,
			"matmul_bf16_64":      &f.matmul64,
			"matmul_bf16_skinny":  &f.matmulSkinny,
			"matmul_bf16w_128":    &f.matmulW128,
			"matmul_bf16w_64":     &f.matmulW64,
			"matmul_bf16w_skinny": &f.matmulWSk,
			"matmul_sum_slices":   &f.matmulSumSlices,
		},
		"attention": {"attention_merge": &f.attentionMerge},
	}
	for i, d := range attnHeadDims {
		e["attention"][fmt.Sprintf("paged_attention_d%d", d)] = &f.attention[i]
		e["attention"][fmt.Sprintf("paged_attention_bf16_d%d", d)] = &f.attentionBF16[i]
		e["attention"][fmt.Sprintf("paged_attention_f16_d%d", d)] = &f.attentionF16[i]
	}
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ptxLoadError describes a failed load of the PTX module name: the driver's
// error, how long the attempt took, and the JIT compiler's error and info
// logs (NUL-terminated C strings in their buffers; one without a NUL
// filled its buffer), each line indented.
func ptxLoadError(name string, err error, errLog, infoLog []byte, wall time.Duration) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "loading %s: %v (after %v)", name, err, wall.Round(time.Microsecond))
	for _, l := range []struct {
		what string
		buf  []byte
	}{{"JIT error log", errLog}, {"JIT info log", infoLog}} {
		text, truncated := l.buf, true
		if i := bytes.IndexByte(text, 0); i >= 0 {
			text, truncated = text[:i], false
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			fmt.Fprintf(&sb, "\n  %s: empty", l.what)
			continue
		}
		fmt.Fprintf(&sb, "\n  %s:", l.what)
		for _, line := range strings.Split(string(text), "\n") {
			sb.WriteString("\n    " + line)
		}
		if truncated {
			sb.WriteString("\n    (log truncated)")
		}
	}
	return fmt.Errorf("%s", sb.String())
}
