package cachefile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// ModelFingerprint identifies the checkpoint in dir: SHA-256 over its
// config.json and, for each *.safetensors file, its size and its first and
// last MiB. Reading every weight would cost as much as loading the model
// again; the config, the sizes and the tensor bytes at both ends tell apart
// different architectures and different weights of one architecture (the
// synthetic models differ in every tensor).
func ModelFingerprint(dir string) (string, error) {
	h := sha256.New()
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", err
	}
	h.Write(cfg)
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	slices.Sort(files)
	for _, f := range files {
		if err := fingerprintFile(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fingerprintFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "%s %d\n", filepath.Base(path), st.Size())
	const span = 1 << 20
	if _, err := io.CopyN(h, f, min(span, st.Size())); err != nil {
		return err
	}
	if st.Size() > span {
		_, err = io.Copy(h, io.NewSectionReader(f, max(st.Size()-span, span), span))
	}
	return err
}
