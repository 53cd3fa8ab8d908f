package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"kvlab/kernels"
	"math"
	"os"
	"path/filepath"
)

// WriteSafetensors writes tensors to path in safetensors format, each in its
// own DType (F32, BF16 or F16; F16 and BF16 round to nearest, ties to even).
// Data is laid out in the order given; the header's keys come out sorted,
// so the file's bytes depend only on the arguments.
func WriteSafetensors(path string, tensors []*HostTensor, metadata map[string]string) error {
	header := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range tensors {
		es, ok := dtypeSize(t.DType)
		if !ok {
			return fmt.Errorf("tensor %q: cannot write dtype %q; want one of %s, %s, %s", t.Name, t.DType, DTypeF32, DTypeBF16, DTypeF16)
		}
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if n != int64(len(t.Data)) {
			return fmt.Errorf("tensor %q: shape %v holds %d elements but data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("tensor %q: written twice", t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar: JSON [] rather than null
		}
		header[t.Name] = headerEntry{DType: t.DType, Shape: shape, DataOffsets: []int64{off, off + n*int64(es)}}
		off += n * int64(es)
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return err
	}
	// Pad with spaces so the data starts 8-byte aligned, as the reference
	// implementation does; readers that mmap the file rely on it.
	for (8+len(hdr))%8 != 0 {
		hdr = append(hdr, ' ')
	}

	// Write beside path and rename over it: a model loaded from the old
	// file maps it, and truncating a mapped file in place would make that
	// model fault (SIGBUS) on its next read. The rename leaves the old
	// file's data to its mappings.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a failure; a no-op after the rename
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	w.Write(lenBuf[:])
	w.Write(hdr)
	var b [4]byte
	for _, t := range tensors {
		for _, v := range t.Data {
			switch t.DType {
			case DTypeF32:
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
				w.Write(b[:4])
			case DTypeBF16:
				binary.LittleEndian.PutUint16(b[:], kernels.F32ToBF16(v))
				w.Write(b[:2])
			case DTypeF16:
				binary.LittleEndian.PutUint16(b[:], F32ToF16(v))
				w.Write(b[:2])
			}
		}
	}
	// bufio keeps the first write error and returns it from Flush.
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
