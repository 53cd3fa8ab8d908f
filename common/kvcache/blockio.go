package kvcache

import "fmt"

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
// each hold BlockSize×KVDim values. It is how the persistent tier saves a
// cached block: the caller makes sure b is not freed meanwhile.
func (p *Pool) ReadBlock(l int, b int32, k, v []float32) {
	from := int(b) * p.blockSize
	p.be.ToHost(p.be.View(p.k[l], from, p.blockSize), k)
	p.be.ToHost(p.be.View(p.v[l], from, p.blockSize), v)
}

// WriteBlock stores k and v (BlockSize×KVDim values each, from ReadBlock)
// as layer l's KV of block b, through the same kernel the forward pass
// writes KV with. The block must be one PrepareWrite made private.
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
