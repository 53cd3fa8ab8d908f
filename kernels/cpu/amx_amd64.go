//go:build amd64 && !purego

package cpu

// Implemented in amx_amd64.s.
//
//go:noescape
func tile2x2AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32)

//go:noescape
func tileBandsAMX(cfg *tileConfig, w *uint16, bands int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16)

//go:noescape
func tileGroupsAMX(cfg *tileConfig, w *uint16, groups int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16)

//go:noescape
func tile2x1AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32)

// amxKernels is avx512Kernels with bf16 products on AMX tiles (amxdot.go).
// Everything else, float32 products included, is avx512's. It runs only
// when asked for (KVLAB_KERNEL_SET=amx): a cold prompt's products are
// several times faster, a single sequence's decode slower
// (docs/benchmarks/cpu-kernels.md, "AMX").
var amxKernels = func() kernelSet {
	ks := avx512Kernels
	ks.name = "amx"
	ks.tiles, ks.optIn = true, true
	return ks
}()

// hasAMX reports whether this CPU has AMX tiles with bf16 products
// (AMX-TILE, AMX-BF16), the operating system saves the tile state
// (XCR0's XTILECFG and XTILEDATA) and has let this process use it
// (requestAMX). It implies hasAVX512BF16 in practice; it is checked too,
// since the set's other bf16 kernels are avx512's.
func hasAMX() bool {
	if !hasAVX512BF16() {
		return false
	}
	_, _, _, edx7 := cpuid(7, 0)
	const amxBF16, amxTile = 1 << 22, 1 << 24
	if edx7&(amxBF16|amxTile) != amxBF16|amxTile {
		return false
	}
	const tileState = 3 << 17 // XTILECFG, XTILEDATA
	if xgetbv0()&tileState != tileState {
		return false
	}
	return requestAMX()
}
