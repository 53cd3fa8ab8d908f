//go:build linux && amd64 && !purego

package cpu

import "syscall"

// requestAMX asks Linux for the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): without it the first tile
// instruction faults. The permission is the whole process's, and the
// kernel then saves the tiles on every switch and signal.
func requestAMX() bool {
	const archReqXcompPerm, xfeatureXTileData = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0)
	return errno == 0
}
