//go:build !linux

package cli

// memoryLimit returns 0 (unknown) where the physical memory is not read:
// the KV pool's size is then not checked before allocation.
func memoryLimit() int64 { return 0 }
