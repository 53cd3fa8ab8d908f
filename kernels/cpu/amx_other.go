//go:build !amd64 || purego

package cpu

// Without the amd64 assembly no kernel set has AMX tiles (kernelSet.tiles
// is false in every set), so these are never called.

func tile2x2AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32) {
	panic("cpu: no AMX tiles in this build")
}

func tile2x1AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32) {
	panic("cpu: no AMX tiles in this build")
}

func tileBandsAMX(cfg *tileConfig, w *uint16, bands int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16) {
	panic("cpu: no AMX tiles in this build")
}

func tileGroupsAMX(cfg *tileConfig, w *uint16, groups int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16) {
	panic("cpu: no AMX tiles in this build")
}
