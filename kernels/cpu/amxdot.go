package cpu

import (
	"sync"
	"unsafe"
)

// bf16 products on AMX tiles: the third definition of a MatMulT output
// element, for the "amx" kernel set (kernelset.go) when bf16 products are
// on (bf16dot.go).
//
// Intel's AMX multiplies a 16×32 tile of bf16 values by a 32×16 one in one
// instruction, TDPBF16PS: 8,192 products where VDPBF16PS does 32, about
// eight times the bf16 products a cycle on the cores that have it (Xeon
// since Sapphire Rapids). It cannot follow bf16dot.go's order: each
// output element of the instruction keeps two sums of its own that start
// at zero, and adds them to the accumulator only at the end. So this set
// defines its own order, the instruction's, and every row of every
// product of the process follows it, alone or in a batch, with or without
// a prefix cache:
//
//  0. The row of x is rounded to bf16 (toBF16), as in bf16dot.go.
//  1. The accumulator r starts at +0. For each block of 32 elements
//     (k0 = 0, 32, 64, …; the last block may be shorter), two sums e and o
//     start at +0: e takes the even elements of the block in order,
//     e = dpStep(e, x[i], w[i]) for i = k0, k0+2, …, and o the odd ones,
//     i = k0+1, k0+3, … (dpStep: the exact product added, rounded once
//     to nearest even, subnormal inputs and results flushed to zero).
//  2. Then r = tileAdd(r, tileAdd(e, o)): the sum of e and o, then added
//     to r, each rounded once with the same flushing.
//
// TestAMXInstruction checks the CPU's TDPBF16PS against steps 1 and 2.
// The values are as close to float32 as bf16dot.go's (TestAMXAccuracy);
// the bits differ from the other sets' bf16 products, so a comparison
// across sets runs with -bf16-dot=false or KVLAB_KERNEL_SET=avx512.

// tileAdd is a + b rounded once, reading a subnormal input as zero and
// writing a subnormal result as zero, as TDPBF16PS adds.
func tileAdd(a, b float32) float32 {
	return flushSubnormal(flushSubnormal(a) + flushSubnormal(b))
}

// tileBlock is steps 1 and 2 for one block: r plus the block's two sums.
func tileBlock(r float32, x, w []uint16) float32 {
	var e, o float32
	for i := 0; i < len(x); i += 2 {
		e = dpStep(e, x[i], w[i])
		if i+1 < len(x) {
			o = dpStep(o, x[i+1], w[i+1])
		}
	}
	return tileAdd(r, tileAdd(e, o))
}

// tileDotGo is one output element by the definition: steps 1 and 2 over
// every block, starting at block k0/32 with r (0 and +0 for a whole
// product).
func tileDotGo(r float32, x, w []uint16, k0 int) float32 {
	for k := k0; k < len(x); k += 32 {
		end := min(k+32, len(x))
		r = tileBlock(r, x[k:end], w[k:end])
	}
	return r
}

// The tile kernels (amx_amd64.s) compute, over kb whole blocks of 32
// elements, the outputs of bands of sixteen rows of w (ldw bytes apart)
// against blocks of sixteen rows of x packed by packX, into c as tiles of
// 16×16 (a tile row is a row of w, its columns rows of x):
//
//	tile2x2AMX:    two bands against two blocks, tiles 0–3 of c
//	tile2x1AMX:    two bands against one block, tiles 0 and 2
//
// A decode step (at most tileDecodeMax rows of x, one block) reads every
// weight once from memory, and a tile load straight from memory streams
// at about half the rate of vector loads on the machines measured
// (docs/benchmarks/cpu-kernels.md, "AMX"). Its kernels copy the weights
// with vector loads into a buffer a step ahead and load the tiles from
// there; the sums are the same:
//
//	tileGroupsAMX: four bands at a time (four output tiles, so four chains
//	               of products in flight), chunks of four blocks copied
//	tileBandsAMX:  one band at a time, the next band copied in memory order

// tileConfig is the 64-byte operand of LDTILECFG: palette 1, then each
// tile's bytes a row and rows. Tiles 0–3 are outputs, 4–5 weights, 6–7
// packed x.
type tileConfig struct {
	palette, startRow uint8
	_                 [14]byte
	colsb             [16]uint16
	rows              [16]uint8
}

// newTileConfig configures the tiles for blocks of x with c0 and c1
// columns (rows of x, 1 to 16): tiles 0, 2 and 6 take the first block,
// 1, 3 and 7 the second.
func newTileConfig(c0, c1 int) tileConfig {
	cfg := tileConfig{palette: 1}
	for t := range 8 {
		cfg.rows[t] = 16
		cfg.colsb[t] = 64
	}
	for _, t := range []int{0, 2, 6} {
		cfg.colsb[t] = uint16(4 * c0)
	}
	for _, t := range []int{1, 3, 7} {
		cfg.colsb[t] = uint16(4 * max(c1, 1))
	}
	return cfg
}

// Sizes of the tile product: each job covers a panel of tilePanel weight
// rows against up to tileChunk rows of x, whose packed blocks stay in the
// core's cache while the panels stream past.
const (
	tilePanel     = 32
	tileChunk     = 128
	tileDecodeMax = 16 // rows of x that run the decode kernels
)

// tileProduct is one MatMulT with bf16 products on AMX: x rounded to
// bf16 (xb, n rows of in) and packed (xp), w bf16 (out rows of in).
// Job j is rows [r0, r0+tileChunk) with r0 = (j / panels)·tileChunk,
// against panel j % panels.
//
// With bands set (a decode step: at most tileDecodeMax rows of x, whose
// products have only whole blocks) job j is instead the bands of sixteen
// weight rows [j·bands/jobs, (j+1)·bands/jobs), one run of memory each,
// and the rows short of a band go to the last job.
type tileProduct struct {
	d              []float32
	xb, xp, w      []uint16
	n, in, out, kb int
	panels, jobs   int
	bands          int
}

func newTileProduct(d []float32, xb, w []uint16, n, in, out, workers int) tileProduct {
	t := tileProduct{d: d, xb: xb, w: w, n: n, in: in, out: out, kb: in / 32}
	if n <= tileDecodeMax && in%32 == 0 && out >= 16 {
		// Four runs a worker: a run's first band is copied before
		// anything overlaps it, so not too many, and the workers finish
		// close together.
		t.bands = out / 16
		t.jobs = min(t.bands, 4*workers)
		return t
	}
	t.panels = (out + tilePanel - 1) / tilePanel
	t.jobs = t.panels * ((n + tileChunk - 1) / tileChunk)
	return t
}

// packedLen is the length of the packed x for n rows of in elements.
func packedLen(n, in int) int { return (n + 15) / 16 * (in / 32) * 512 }

// packX writes block j of the packed x: its sixteen rows (fewer in the
// last block) in the layout a B tile loads, one 1,024-byte tile for each
// block of 32 elements: row p of the tile holds the pair of elements
// 2p, 2p+1 of each of the sixteen rows, side by side. Only whole blocks
// of 32 are packed; the rest is added in Go (tileProduct.run).
func packX(xp, xb []uint16, n, in, j int) {
	kb := in / 32
	dst := xp[j*kb*512 : (j+1)*kb*512]
	rows := min(16, n-16*j)
	if in%2 == 0 {
		// A pair is one 32-bit word: move words, not halves.
		d32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/2)
		for m := range rows {
			row := xb[(16*j+m)*in : (16*j+m)*in+32*kb]
			r32 := unsafe.Slice((*uint32)(unsafe.Pointer(&row[0])), len(row)/2)
			for q, v := range r32 {
				d32[(q>>4)<<8|(q&15)<<4|m] = v
			}
		}
		return
	}
	for m := range rows {
		row := xb[(16*j+m)*in:]
		for q := range 16 * kb {
			i := (q>>4)<<9 | (q&15)<<5 | m<<1
			dst[i], dst[i+1] = row[2*q], row[2*q+1]
		}
	}
}

// pack packs every block of x, the blocks split across b's workers.
func (t *tileProduct) pack(b *Backend) {
	if t.kb == 0 {
		return
	}
	blocks := (t.n + 15) / 16
	b.parallel(blocks, func(_, j int) { packX(t.xp, t.xb, t.n, t.in, j) })
}

// run computes job j.
func (t *tileProduct) run(job int) {
	if t.bands > 0 {
		t.runBands(job)
		return
	}
	chunk, panel := job/t.panels, job%t.panels
	r0, r1 := chunk*tileChunk, min(t.n, (chunk+1)*tileChunk)
	c0, c1 := panel*tilePanel, min(t.out, (panel+1)*tilePanel)
	var out [1024]float32
	c := c0
	if t.kb == 0 {
		c = c1 // a product shorter than a block: all of it in Go, below
	}
	for ; c+tilePanel <= c1; c += tilePanel {
		w := &t.w[c*t.in]
		for r := r0; r < r1; r += 32 {
			rows0, rows1 := min(16, r1-r), min(16, r1-r-16)
			xp := &t.xp[r/16*t.kb*512]
			if rows1 > 0 {
				cfg := newTileConfig(rows0, rows1)
				tile2x2AMX(&cfg, w, 2*t.in, xp, t.kb, &out[0])
				t.store(&out, r, rows0, c, 0, 2)
				t.store(&out, r+16, rows1, c, 1, 2)
			} else {
				cfg := newTileConfig(rows0, 0)
				tile2x1AMX(&cfg, w, 2*t.in, xp, t.kb, &out[0])
				t.store(&out, r, rows0, c, 0, 2)
			}
		}
	}
	if t.kb == 0 {
		c = c0
	}
	for r := r0; r < r1; r++ {
		xr := t.xb[r*t.in : (r+1)*t.in]
		// Weight rows short of a tile's band: the definition in Go.
		for cc := c; cc < c1; cc++ {
			t.d[r*t.out+cc] = tileDotGo(0, xr, t.w[cc*t.in:(cc+1)*t.in], 0)
		}
		if t.in%32 == 0 {
			continue
		}
		// The last, shorter block of each element the tiles computed.
		for cc := c0; cc < c; cc++ {
			i := r*t.out + cc
			t.d[i] = tileDotGo(t.d[i], xr, t.w[cc*t.in:(cc+1)*t.in], 32*t.kb)
		}
	}
}

// bandsAtOnce is how many bands one call of the decode kernels covers
// when their outputs go through a buffer (more than one row of x), a
// multiple of four.
const bandsAtOnce = 16

// bandRun computes bands [b0, b1) of a decode-step product into c (band b
// at c[(b-b0)·cstep/4:], rows cstride bytes apart), four at a time where
// the product is short enough, the rest one at a time.
func (t *tileProduct) bandRun(cfg *tileConfig, b0, b1 int, c []float32, cstride, cstep int, buf []uint16) {
	b := b0
	if t.kb%4 == 0 && b1-b0 >= 4 {
		groups := (b1 - b0) / 4
		tileGroupsAMX(cfg, &t.w[16*b*t.in], groups, &t.xp[0], t.kb, &c[0], cstride, cstep, &buf[0])
		b += 4 * groups
	}
	if b < b1 {
		tileBandsAMX(cfg, &t.w[16*b*t.in], b1-b, &t.xp[0], t.kb, &c[(b-b0)*cstep/4], cstride, cstep, &buf[0])
	}
}

// runBands computes job j of a decode-step product (bands > 0).
func (t *tileProduct) runBands(job int) {
	b0, b1 := job*t.bands/t.jobs, (job+1)*t.bands/t.jobs
	buf := pooledUint16(&bandBuffers, max(16384, 2*t.kb*512)) // tileGroupsAMX's 32 KB, tileBandsAMX's 2·kb KB
	defer bandBuffers.Put(buf)
	cfg := newTileConfig(t.n, t.n) // tileGroupsAMX's four output tiles all take the block
	if t.n == 1 {
		// The one row's outputs are a tile's column: stored 4 bytes
		// apart, they land in dst in order.
		t.bandRun(&cfg, b0, b1, t.d[16*b0:], 4, 64, *buf)
	} else {
		var out [bandsAtOnce * 256]float32
		for b := b0; b < b1; b += bandsAtOnce {
			nb := min(bandsAtOnce, b1-b)
			t.bandRun(&cfg, b, b+nb, out[:], 64, 1024, *buf)
			for i := range nb {
				tile := out[i*256 : (i+1)*256]
				for m := range t.n {
					dst := t.d[m*t.out+16*(b+i) : m*t.out+16*(b+i)+16]
					for r := range dst {
						dst[r] = tile[r*16+m]
					}
				}
			}
		}
	}
	if job == t.jobs-1 {
		// Weight rows short of a band: the definition in Go.
		for m := range t.n {
			xr := t.xb[m*t.in : (m+1)*t.in]
			for c := 16 * t.bands; c < t.out; c++ {
				t.d[m*t.out+c] = tileDotGo(0, xr, t.w[c*t.in:(c+1)*t.in], 0)
			}
		}
	}
}

// store copies the tiles of one block of x, b, b+step, … (one for each
// of 4/step bands of sixteen weight rows) into rows [r, r+rows) of dst,
// columns from c0: a tile's row is a weight row, its columns rows of x.
func (t *tileProduct) store(out *[1024]float32, r, rows, c0, b, step int) {
	for band := range 4 / step {
		ti := b + step*band
		tile := out[ti*256 : (ti+1)*256]
		for m := range rows {
			dst := t.d[(r+m)*t.out+c0+16*band : (r+m)*t.out+c0+16*band+16]
			for n := range dst {
				dst[n] = tile[n*16+m]
			}
		}
	}
}

// packedRows are the packed blocks of x of tile products, and
// bandBuffers the buffers the decode kernels copy weights through, pooled
// apart (their sizes differ) so that decode steps do not allocate.
var packedRows, bandBuffers sync.Pool // *[]uint16
