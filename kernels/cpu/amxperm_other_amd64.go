//go:build amd64 && !linux && !purego

package cpu

// requestAMX reports false: this build asks only Linux for the tile state.
func requestAMX() bool { return false }
