package cachefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// TempPattern names the temporary file a writer writes before its rename
// (os.CreateTemp's pattern); RemoveStaleTemps removes what a crash left of
// one.
const TempPattern = ".kvcache-*"

// RemoveStaleTemps removes the temporary files a writer left in dir when
// the process died before its rename (a writer removes its own on any
// error), and returns their names. Call it before anything writes into
// dir. Only regular files are removed.
func RemoveStaleTemps(dir string) ([]string, error) {
	stale, err := filepath.Glob(filepath.Join(dir, TempPattern))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, p := range stale {
		if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, filepath.Base(p))
	}
	return removed, nil
}

// RefusedMark is what SetAside puts between a file's name and the time.
const RefusedMark = ".refused-"

// SetAside renames the file at path to path.refused-<time> and returns its
// new path: a file that could not be used is kept byte for byte for
// whoever wants to look at it (or start the server it was written for),
// and the next write under its name writes a fresh file instead of
// overwriting it.
func SetAside(path string, now time.Time) (string, error) {
	aside := path + RefusedMark + now.UTC().Format("20060102-150405.000000000")
	for i := 1; ; i++ { // a rename replaces its target: never one set aside before
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s%s%s-%d", path, RefusedMark, now.UTC().Format("20060102-150405.000000000"), i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}
