package model

import "fmt"

// LockError is a refused LoadOptions.Mlock: the OS would not lock Size
// bytes of mapped weights in memory.
type LockError struct {
	Size int64
	// Limit is RLIMIT_MEMLOCK, the bytes this process may lock; -1 when
	// unknown or unlimited.
	Limit int64
	// ByLimit tells the errors the limit causes (ENOMEM, EAGAIN, EPERM)
	// from the rest.
	ByLimit bool
	Err     error
}

// Error says how much was to be locked, why it could not be, and, when the
// limit is the cause, how to raise it, as llama.cpp's message does.
func (e *LockError) Error() string {
	msg := fmt.Sprintf("locking %s of mapped weights in memory: %v", sizeString(e.Size), e.Err)
	if !e.ByLimit {
		return msg
	}
	allows := "limits how much memory this process may lock"
	if e.Limit >= 0 {
		allows = "allows this process to lock " + sizeString(e.Limit)
	}
	return msg + ": RLIMIT_MEMLOCK " + allows + "; raise it (ulimit -l unlimited in the shell that starts the server, LimitMEMLOCK=infinity in a systemd unit, --ulimit memlock=-1 for docker) or run without locking"
}

func (e *LockError) Unwrap() error { return e.Err }

// sizeString formats n bytes for a reader: 1.2 GB, 8.4 MB, 64 kB, 4096 bytes.
func sizeString(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}
