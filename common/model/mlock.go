package model

import "fmt"

// lockError explains a refused mlock of size bytes: how much the limit
// allows (limit < 0: unknown or unlimited) and how to raise it. refused
// tells the errors a limit causes (ENOMEM, EAGAIN, EPERM) from the rest.
func lockError(size int64, err error, limit int64, refused bool) error {
	if !refused {
		return fmt.Errorf("locking %s of mapped weights in memory: %w", sizeString(size), err)
	}
	allows := "limits how much memory this process may lock"
	if limit >= 0 {
		allows = "allows this process to lock " + sizeString(limit)
	}
	return fmt.Errorf("locking %s of mapped weights in memory: %w: RLIMIT_MEMLOCK %s; raise it (ulimit -l unlimited in the shell that starts the server, LimitMEMLOCK=infinity in a systemd unit, --ulimit memlock=-1 for docker) or run without locking",
		sizeString(size), err, allows)
}

// sizeString formats n bytes for a reader: 1.2 GB, 8.4 MB, 4096 bytes.
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
