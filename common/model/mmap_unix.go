//go:build linux || darwin

package model

import (
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mapSupported reports whether Load maps checkpoints here.
const mapSupported = true

// mapFile maps the first size bytes of f read-only. MAP_SHARED makes the
// pages the page cache's own: nothing is copied, pages are read from disk
// only when first touched, and every process that maps or reads the same
// file shares them.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > math.MaxInt {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	// No madvise(MADV_WILLNEED): measured on a start-up, it made the first
	// answer no sooner, warm or cold (docs/benchmarks/startup.md,
	// "Start-up with mapped weights"); the kernel's read-around already
	// reads a cold file in large pieces.
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

// lockPages locks b in RAM (mlock), faulting every page in. The kernel
// refuses beyond RLIMIT_MEMLOCK unless the process may lock any amount
// (CAP_IPC_LOCK); the error then says what the limit is and how to raise
// it, as llama.cpp's does.
func lockPages(b []byte) error {
	err := unix.Mlock(b)
	if err == nil {
		return nil
	}
	limit := int64(-1)
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil && lim.Cur != unix.RLIM_INFINITY && lim.Cur <= math.MaxInt64 {
		limit = int64(lim.Cur)
	}
	byLimit := errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EPERM)
	return &LockError{Size: int64(len(b)), Limit: limit, ByLimit: byLimit, Err: err}
}
