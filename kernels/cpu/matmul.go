package cpu

import (
	"fmt"

	"kvlab/kernels"
)

// Block sizes of MatMulT's parallel jobs. They only decide which goroutine
// computes which outputs and in what order the outputs are visited; every
// output element is one whole dot product in the order fixed in dot.go, so
// these numbers can change without changing a single bit of any result.
const (
	mmRowBlock = 48 // rows of x per job, a multiple of 6 and 3 (the tile heights)
	mmColBlock = 64 // rows of w (output columns) per job, a multiple of 8
)

// MatMulT computes dst = x · wᵀ. Each output element is the dot product of
// a row of x with a row of w, computed in the one order described in dot.go
// whatever the number of rows, the tiling or the goroutine that runs it.
//
// The output is cut into jobs of up to mmRowBlock×mmColBlock elements (a
// single row: two even column ranges per worker) that the backend's
// workers share. Within a job, full tiles cover most of the output: six
// rows of x against eight of w (48 accumulators, two per AVX-512 register)
// where the CPU has AVX-512, otherwise three rows against four (twelve
// AVX2 accumulators). The rows left over go eight columns at a time, which
// is also the whole of a decode step's single-row products: that kernel
// streams each weight row once, the job split keeping every core streaming
// its own columns.
func (b *Backend) MatMulT(dst, x, w kernels.Tensor) {
	p := b.planProduct(dst, x, w)
	if p.jobs == 0 {
		return
	}
	if p.dp {
		xb := b.roundRows(p.x)
		defer bf16Rows.Put(xb)
		p.xb = *xb
		if p.tile != nil {
			xp := b.packRows(p.tile, p.xb)
			defer packedRows.Put(xp)
		}
	}
	b.parallel(p.jobs, func(_, job int) { p.run(job) })
}

// packRows packs the rounded rows xb for the tile product t (amxdot.go)
// into a pooled buffer, which the caller gives back with packedRows.Put.
func (b *Backend) packRows(t *tileProduct, xb []uint16) *[]uint16 {
	xp := pooledUint16(&packedRows, packedLen(t.n, t.in))
	t.xb, t.xp = xb, *xp
	t.pack(b)
	return xp
}

// MatMulTMany computes ps[i].Dst = x · ps[i].Wᵀ for every i
// (kernels.ProductBatcher): the jobs of all the products go to the workers
// in one hand-off, and each output element is the same dot product as
// MatMulT's, so the bits are those of one MatMulT per product. With bf16
// products on, x is rounded to bf16 once for all of them.
func (b *Backend) MatMulTMany(x kernels.Tensor, ps []kernels.Product) {
	var buf [4]product
	plans, jobs := buf[:0], 0
	var xb, xp *[]uint16
	var packed *tileProduct
	for _, p := range ps {
		pl := b.planProduct(p.Dst, x, p.W)
		if pl.dp && pl.jobs > 0 {
			if xb == nil {
				xb = b.roundRows(pl.x)
				defer bf16Rows.Put(xb)
			}
			pl.xb = *xb
			if pl.tile != nil {
				// Every product has the same x: one packing for all.
				if xp == nil {
					xp = b.packRows(pl.tile, pl.xb)
					defer packedRows.Put(xp)
					packed = pl.tile
				}
				pl.tile.xb, pl.tile.xp = packed.xb, packed.xp
			}
		}
		plans = append(plans, pl)
		jobs += pl.jobs
	}
	if jobs == 0 {
		return
	}
	b.parallel(jobs, func(_, job int) {
		for i := range plans {
			if job < plans[i].jobs {
				plans[i].run(job)
				return
			}
			job -= plans[i].jobs
		}
	})
}

// product is one MatMulT cut into jobs: job j computes rows
// [r0, r0+mmRowBlock) × columns [c0, c0+colBlock) of dst, where r0 =
// (j / colBlocks)·mmRowBlock and c0 = (j % colBlocks)·colBlock, or with
// colMajor r0 = (j % rowBlocks)·mmRowBlock and c0 = (j / rowBlocks)·colBlock.
type product struct {
	d, x, w             *Tensor
	n, in, out          int
	colBlock, colBlocks int
	rowBlocks           int
	colMajor            bool     // job j is column block j / rowBlocks, row block j % rowBlocks
	jobs                int      // 0: nothing left to compute
	dp                  bool     // a bf16 product (bf16dot.go): w is bf16 and BF16Dot is on
	xb                  []uint16 // x rounded to bf16, when dp
	// tile, for a bf16 product in a set with AMX tiles, replaces the jobs
	// above with its own (amxdot.go).
	tile *tileProduct
}

// planProduct checks the shapes of dst = x · wᵀ and cuts it into jobs
// (none when the product is empty, or zero because in is).
func (b *Backend) planProduct(dst, x, w kernels.Tensor) product {
	d, xt, wt := asCPU(dst), asCPU(x), asWeight(w)
	n, in, out := xt.rows, xt.cols, wt.rows
	if wt.cols != in || d.rows != n || d.cols != out {
		panic(fmt.Sprintf("cpu: MatMulT %d×%d · (%d×%d)ᵀ into %d×%d",
			n, in, wt.rows, wt.cols, d.rows, d.cols))
	}
	p := product{d: d, x: xt, w: wt, n: n, in: in, out: out, dp: b.bf16Dot && wt.bf16 != nil}
	if n == 0 || out == 0 {
		return p
	}
	if in == 0 {
		clear(d.Data)
		return p
	}
	if p.dp && kern.tiles {
		t := newTileProduct(d.Data, nil, wt.bf16, n, in, out, b.workers)
		p.tile, p.jobs = &t, t.jobs
		return p
	}
	rowBlocks := (n + mmRowBlock - 1) / mmRowBlock
	p.colBlock = mmColBlock
	if n == 1 && b.workers > 1 {
		// A decode row: two jobs per worker, cut evenly (in whole
		// eight-column steps), so the cores finish together; 288 columns
		// would otherwise go 160 to one core and 128 to the other.
		jobs := 2 * b.workers
		p.colBlock = max(8, ((out+jobs-1)/jobs+7)/8*8)
	}
	p.colBlocks = (out + p.colBlock - 1) / p.colBlock
	p.jobs = rowBlocks * p.colBlocks
	// A bf16 product's tiles compute twice as fast as the float32 ones
	// and wait on memory where those do not: with more weight rows than
	// rows of x (both bf16), the jobs go down the rows of x under one
	// block of weights, which then stays in the core's cache, instead of
	// across every weight for each block of rows (BenchmarkMatMulTBF16Dot's
	// Llama-3.2-1B shapes; docs/benchmarks/real-models.md, "bf16 products").
	p.colMajor = p.dp && out > n
	return p
}

// run computes job j of the product.
func (p *product) run(job int) {
	if p.tile != nil {
		p.tile.run(job)
		return
	}
	rb, cb := job/p.colBlocks, job%p.colBlocks
	if p.colMajor {
		rowBlocks := p.jobs / p.colBlocks
		rb, cb = job%rowBlocks, job/rowBlocks
	}
	r0, c0 := rb*mmRowBlock, cb*p.colBlock
	rows, cols := min(mmRowBlock, p.n-r0), min(p.colBlock, p.out-c0)
	switch {
	case p.dp:
		matMulBlock(&kern.dp, p.d.Data, p.out, p.xb, p.w.bf16, p.in, r0, rows, c0, cols)
	case p.w.bf16 != nil:
		matMulBlock(&kern.bf16, p.d.Data, p.out, p.x.Data, p.w.bf16, p.in, r0, rows, c0, cols)
	default:
		matMulBlock(&kern.f32, p.d.Data, p.out, p.x.Data, p.w.Data, p.in, r0, rows, c0, cols)
	}
}

// matMulBlock computes rows [r0, r0+rows) × columns [c0, c0+cols) of
// dst = x · wᵀ, where x and w have in columns and dst has ldd.
func matMulBlock[X, W float32 | uint16](k *dotKernels[X, W], dst []float32, ldd int, x []X, w []W, in, r0, rows, c0, cols int) {
	g := groupLen[X]()
	nb := in / g
	r, end := r0, r0+rows
	if k.dots6x8 != nil || k.dots2x8 != nil {
		// Six-row bands, then what they leave two rows at a time (where
		// the set has those tiles), each group of eight weight rows
		// visited once for all of them: a serving step of eight sequences
		// reads its weights from memory once, not once for the band and
		// again for the pair.
		r = matMulBands(k, dst, ldd, x, in, w, in, nb, r, end, c0, cols)
	}
	// What is left still fills three-row tiles.
	r = matMulTiles(k, k.dots3x4, 3, 4, dst, ldd, x, in, w, in, nb, r, end, c0, cols)
	// Rows left over (all of them for a decode): the whole column range at
	// once where the set has rowLanes, else eight columns at a time.
	c8 := c0 + cols/8*8
	for ; r < end; r++ {
		xr := x[r*in : (r+1)*in]
		if k.rowLanes != nil {
			k.rowLanes(xr, w[c0*in:], in, nb, dst[r*ldd+c0:], cols)
			continue
		}
		for c := c0; c < c8; c += 8 {
			k.dots1x8(xr, w[c*in:], in, nb, dst[r*ldd+c:])
		}
		for c := c8; c < c0+cols; c++ {
			dst[r*ldd+c] = k.dots1x1(xr, w[c*in:], nb)
		}
	}
	if in%g == 0 {
		return
	}
	for r := r0; r < end; r++ {
		xr := x[r*in : (r+1)*in]
		for c := c0; c < c0+cols; c++ {
			dst[r*ldd+c] = dotTail(dst[r*ldd+c], xr, w[c*in:(c+1)*in], g*nb)
		}
	}
}

// matMulBands covers rows [r, end) with k's 6×8 tiles and then, for what
// they leave, its 2×8 tiles (each where k has them), visiting all the bands of
// a group of eight weight rows before the next group, so that the group
// comes from memory once for every band. One band of each group runs the
// tile that prefetches the next group (next6x8, next2x8) where k has one:
// the first band when the rows are few (prefetchFirstRows), so that the
// prefetch spreads over the longest tile instead of the two-row one that
// would end a serving step's eight rows, and otherwise the last, whose
// prefetched lines then come just before they are read.
// It returns the first row it left.
func matMulBands[X, W float32 | uint16](k *dotKernels[X, W], dst []float32, ldd int, x []X, ldx int, w []W, ldw, nb, r, end, c0, cols int) int {
	r1 := r // end of the rows the 6×8 tiles cover
	if k.dots6x8 != nil {
		r1 += (end - r) / 6 * 6
	}
	r2 := r1 // and of those the 2×8 tiles cover
	if k.dots2x8 != nil {
		r2 += (end - r1) / 2 * 2
	}
	// pf is the first row of the band that prefetches.
	pf := r
	if r2-r > prefetchFirstRows {
		pf = r2 - 2
		if r2 == r1 {
			pf = r1 - 6
		}
	}
	ct := c0 + cols/8*8
	for c := c0; c < ct; c += 8 {
		for i := r; i < r2; {
			tile, next, h := k.dots6x8, k.next6x8, 6
			if i >= r1 {
				tile, next, h = k.dots2x8, k.next2x8, 2
			}
			if i == pf && next != nil {
				tile = next
			}
			tile(x[i*ldx:], ldx, w[c*ldw:], ldw, nb, dst[i*ldd+c:], ldd)
			i += h
		}
	}
	for i := r; i < r2; i++ {
		for c := ct; c < c0+cols; c++ {
			dst[i*ldd+c] = k.dots1x1(x[i*ldx:], w[c*ldw:], nb)
		}
	}
	return r2
}

// prefetchFirstRows is the most rows for which matMulBands prefetches the
// next group of weights in a group's first band (BenchmarkMatMulTFewRows).
const prefetchFirstRows = 12

// matMulTiles covers as many whole th-row bands of rows [r, end) as fit
// with th×tw tiles over columns [c0, c0+cols), the columns short of a tile
// one element at a time, and returns the first row it left. Row i of x
// starts at x[i*ldx:] and row c of w at w[c*ldw:]; each product is over
// 8*nb elements (no tail).
func matMulTiles[X, W float32 | uint16](k *dotKernels[X, W], tile func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int),
	th, tw int, dst []float32, ldd int, x []X, ldx int, w []W, ldw, nb, r, end, c0, cols int) int {
	if tile == nil {
		return r
	}
	rt := r + (end-r)/th*th // end of the rows covered by tiles
	ct := c0 + cols/tw*tw   // end of the columns covered by tiles
	// tw columns of w at a time against every th rows of x: the weight
	// rows stay in L1 while the rows of x stream past.
	for c := c0; c < ct; c += tw {
		for i := r; i < rt; i += th {
			tile(x[i*ldx:], ldx, w[c*ldw:], ldw, nb, dst[i*ldd+c:], ldd)
		}
	}
	for i := r; i < rt; i++ {
		for c := ct; c < c0+cols; c++ {
			dst[i*ldd+c] = k.dots1x1(x[i*ldx:], w[c*ldw:], nb)
		}
	}
	return rt
}
