//go:build !linux && !darwin

package model

import (
	"errors"
	"os"
)

// mapSupported reports whether Load maps checkpoints here: not on this OS,
// where it reads every tensor instead.
const mapSupported = false

var errNoMmap = errors.New("mapping files is not supported on this OS")

func mapFile(*os.File, int64) ([]byte, error) { return nil, errNoMmap }

func unmapFile([]byte) error { return errNoMmap }

func lockPages([]byte) error { return errNoMmap }
