package kvcache

import (
	"encoding/binary"
	"fmt"
	"math"

	"kvlab/kernels"
)

// Layers returns the number of layers the pool stores KV for.
func (p *Pool) Layers() int { return len(p.k) }

// KVDim returns the width of one KV slot (KV heads × head dim).
func (p *Pool) KVDim() int {
	if len(p.k) == 0 {
		return 0
	}
	return p.k[0].Cols()
}

// ReadBlock copies layer l's K and V rows of block b to the host; k and v
// each hold BlockSize×KVDim values, widened exactly from a 16-bit pool.
// The caller makes sure b is not freed meanwhile.
func (p *Pool) ReadBlock(l int, b int32, k, v []float32) {
	from := int(b) * p.blockSize
	p.be.ToHost(p.be.View(p.k[l], from, p.blockSize), k)
	p.be.ToHost(p.be.View(p.v[l], from, p.blockSize), v)
}

// WriteBlock stores k and v (BlockSize×KVDim values each, from ReadBlock)
// as layer l's KV of block b, through the same kernel the forward pass
// writes KV with (which rounds to a 16-bit pool's dtype: values ReadBlock
// widened come back exactly). The block must be one PrepareWrite made
// private.
func (p *Pool) WriteBlock(l int, b int32, k, v []float32) error {
	n := p.blockSize * p.KVDim()
	if len(k) != n || len(v) != n {
		return fmt.Errorf("kvcache: a block of layer %d holds %d values, have %d and %d", l, n, len(k), len(v))
	}
	kt := p.be.FromHost(p.blockSize, p.KVDim(), k)
	vt := p.be.FromHost(p.blockSize, p.KVDim(), v)
	defer p.be.Free(kt)
	defer p.be.Free(vt)
	slots := make([]int32, p.blockSize)
	for i := range slots {
		slots[i] = b*int32(p.blockSize) + int32(i)
	}
	p.be.WriteKV(p.k[l], p.v[l], kt, vt, slots)
	return nil
}

// BlockBytes returns the size of one layer's K and V of one block in the
// pool's dtype: 2 × BlockSize × KVDim × (4 or 2) bytes, what AppendBlock
// appends.
func (p *Pool) BlockBytes() int { return 2 * p.blockSize * p.KVDim() * p.dtype.Bytes() }

// AppendBlock appends layer l's K then V rows of block b to dst, in the
// pool's dtype, little-endian: float32 bits, or the 16-bit patterns the
// cache holds. A 16-bit pool's block is half the bytes of a float32 one,
// and no value is rounded on the way (ReadBlock's widening is exact, and
// narrowing a widened value gives it back). The caller makes sure b is not
// freed meanwhile. scratch, if it holds 2 × BlockSize × KVDim floats, is
// where the rows are read: a caller that appends block after block (a
// cache save) passes the same one and allocates nothing per block; nil
// allocates it.
func (p *Pool) AppendBlock(dst []byte, l int, b int32, scratch []float32) []byte {
	n := p.blockSize * p.KVDim()
	if len(scratch) < 2*n {
		scratch = make([]float32, 2*n)
	}
	k, v := scratch[:n], scratch[n:2*n]
	p.ReadBlock(l, b, k, v)
	for _, half := range [][]float32{k, v} {
		for _, f := range half {
			switch p.dtype {
			case kernels.KVF32:
				dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
			case kernels.KVBF16:
				dst = binary.LittleEndian.AppendUint16(dst, kernels.F32ToBF16(f))
			case kernels.KVF16:
				dst = binary.LittleEndian.AppendUint16(dst, kernels.F32ToF16(f))
			}
		}
	}
	return dst
}

// WriteBlockBytes stores raw, BlockBytes bytes from AppendBlock on a pool
// of the same dtype, as layer l's KV of block b (see WriteBlock).
func (p *Pool) WriteBlockBytes(l int, b int32, raw []byte) error {
	if len(raw) != p.BlockBytes() {
		return fmt.Errorf("kvcache: a block of layer %d holds %d bytes of %s KV, have %d", l, p.BlockBytes(), p.dtype.Name(), len(raw))
	}
	n := p.blockSize * p.KVDim()
	kv := make([]float32, 2*n)
	for i := range kv {
		switch p.dtype {
		case kernels.KVF32:
			kv[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		case kernels.KVBF16:
			kv[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		case kernels.KVF16:
			kv[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
	return p.WriteBlock(l, b, kv[:n], kv[n:])
}
