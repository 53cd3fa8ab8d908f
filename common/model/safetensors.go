package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"kvlab/kernels"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// A safetensors file is
//
//	8 bytes      N, the header length, little-endian uint64
//	N bytes      JSON: {"name": {"dtype": "F32", "shape": [r, c],
//	             "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
//	the rest     tensor data; offsets are relative to the first byte here
//
// Tensors are row-major and little-endian.

// On-disk dtypes this package reads and writes.
const (
	DTypeF32  = "F32"
	DTypeF16  = "F16"
	DTypeBF16 = "BF16"
)

// maxHeaderLen bounds the header so a corrupt length cannot make us
// allocate gigabytes before failing.
const maxHeaderLen = 100 << 20

// dtypeSize gives the element size of each dtype this package decodes.
func dtypeSize(dtype string) (int, bool) {
	switch dtype {
	case DTypeF32:
		return 4, true
	case DTypeF16, DTypeBF16:
		return 2, true
	}
	return 0, false
}

// TensorInfo is one entry of a safetensors header.
type TensorInfo struct {
	Name        string
	DType       string
	Shape       []int
	DataOffsets [2]int64 // [begin, end) relative to the data section
}

// NumElements is the product of the shape (1 for a scalar).
func (ti TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range ti.Shape {
		n *= int64(d)
	}
	return n
}

// SafetensorsFile is an open safetensors file whose header has been parsed
// and checked. Tensor data is read on demand, so loading a model never
// holds more than one raw tensor in memory, or, when the file is mapped
// (Load maps it), taken from the mapping.
type SafetensorsFile struct {
	Path     string
	Metadata map[string]string
	tensors  map[string]TensorInfo
	f        *os.File // nil once the file is mapped, or closed
	mm       []byte   // the whole file, mapped read-only; nil when read
	dataOff  int64    // file offset of the data section
}

type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// OpenSafetensors opens path and validates its header: JSON syntax, the
// entry fields, and that every tensor's data_offsets lie inside the file.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	return openSafetensors(path, false)
}

// openSafetensors is OpenSafetensors, mapping the file when mapped is set
// and this OS supports it. A file that cannot be mapped is read instead.
func openSafetensors(path string, mapped bool) (*SafetensorsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := parseSafetensors(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if mapped && mapSupported {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if mm, err := mapFile(f, fi.Size()); err == nil {
			// The mapping holds the file open; the descriptor is not
			// needed any more.
			st.mm, st.f = mm, nil
			f.Close()
		}
	}
	return st, nil
}

func parseSafetensors(f *os.File, path string) (*SafetensorsFile, error) {
	name := filepath.Base(path)
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("%s: truncated: %d bytes, too short for the 8-byte header length", name, size)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeaderLen {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit (not a safetensors file?)", name, n, maxHeaderLen)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("%s: truncated: header length %d but only %d bytes follow", name, n, size-8)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", name, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("%s: bad header JSON: %w", name, err)
	}
	st := &SafetensorsFile{
		Path:    path,
		tensors: make(map[string]TensorInfo, len(raw)),
		f:       f,
		dataOff: 8 + int64(n),
	}
	dataLen := size - st.dataOff
	for key, val := range raw {
		if key == "__metadata__" {
			if err := json.Unmarshal(val, &st.Metadata); err != nil {
				return nil, fmt.Errorf("%s: bad header JSON: __metadata__: %w", name, err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(val, &e); err != nil {
			return nil, fmt.Errorf("%s: bad header JSON: tensor %q: %w", name, key, err)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets has %d entries; want 2", name, key, len(e.DataOffsets))
		}
		ti := TensorInfo{Name: key, DType: e.DType, Shape: e.Shape, DataOffsets: [2]int64{e.DataOffsets[0], e.DataOffsets[1]}}
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%s: tensor %q: negative dimension in shape %v", name, key, e.Shape)
			}
		}
		if ti.DataOffsets[0] < 0 || ti.DataOffsets[1] < ti.DataOffsets[0] {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets %v are not an increasing pair", name, key, e.DataOffsets)
		}
		// An unknown dtype is reported when (if ever) the tensor is read, so
		// a checkpoint carrying some extra integer buffer still opens.
		if es, ok := dtypeSize(ti.DType); ok {
			if want := ti.NumElements() * int64(es); ti.DataOffsets[1]-ti.DataOffsets[0] != want {
				return nil, fmt.Errorf("%s: tensor %q: data_offsets %v span %d bytes; a %s tensor of shape %v needs %d",
					name, key, e.DataOffsets, ti.DataOffsets[1]-ti.DataOffsets[0], ti.DType, ti.Shape, want)
			}
		}
		st.tensors[key] = ti
	}
	// Report the first tensor (in file order) that runs past the end: after
	// a cut-short download that is where the damage starts.
	infos := st.Infos()
	sort.Slice(infos, func(i, j int) bool { return infos[i].DataOffsets[0] < infos[j].DataOffsets[0] })
	for _, ti := range infos {
		if ti.DataOffsets[1] > dataLen {
			return nil, fmt.Errorf("%s: truncated: tensor %q has data_offsets [%d, %d] but the data section holds only %d bytes",
				name, ti.Name, ti.DataOffsets[0], ti.DataOffsets[1], dataLen)
		}
	}
	return st, nil
}

// Close closes the underlying file, or unmaps it. Nothing read from a
// mapping by Read outlives it (Read copies); the views Load wraps into
// tensors must be freed first. Closing twice is harmless.
func (st *SafetensorsFile) Close() error {
	var err error
	if st.mm != nil {
		err = unmapFile(st.mm)
		st.mm = nil
	}
	if st.f != nil {
		err = errors.Join(err, st.f.Close())
		st.f = nil
	}
	return err
}

// Info returns the header entry for name.
func (st *SafetensorsFile) Info(name string) (TensorInfo, bool) {
	ti, ok := st.tensors[name]
	return ti, ok
}

// Infos returns every header entry, sorted by name.
func (st *SafetensorsFile) Infos() []TensorInfo {
	out := make([]TensorInfo, 0, len(st.tensors))
	for _, ti := range st.tensors {
		out = append(out, ti)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Read returns tensor name converted to float32, with its shape.
func (st *SafetensorsFile) Read(name string) (*HostTensor, error) {
	base := filepath.Base(st.Path)
	ti, ok := st.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q not found", base, name)
	}
	if _, ok := dtypeSize(ti.DType); !ok {
		return nil, fmt.Errorf("%s: tensor %q has dtype %q; want one of %s, %s, %s", base, name, ti.DType, DTypeF32, DTypeBF16, DTypeF16)
	}
	buf, err := st.raw(ti)
	if err != nil {
		return nil, err
	}
	return &HostTensor{Name: name, DType: ti.DType, Shape: append([]int(nil), ti.Shape...), Data: Decode(buf, ti.DType)}, nil
}

// raw returns the bytes of tensor ti: a slice of the mapping, valid until
// Close, when the file is mapped; otherwise read into a new buffer.
func (st *SafetensorsFile) raw(ti TensorInfo) ([]byte, error) {
	lo, hi := st.dataOff+ti.DataOffsets[0], st.dataOff+ti.DataOffsets[1]
	if st.mm != nil {
		return st.mm[lo:hi:hi], nil
	}
	if st.f == nil {
		return nil, fmt.Errorf("%s: reading tensor %q: file already closed", filepath.Base(st.Path), ti.Name)
	}
	buf := make([]byte, hi-lo)
	if err := st.readAt(buf, lo, ti.Name); err != nil {
		return nil, err
	}
	return buf, nil
}

func (st *SafetensorsFile) readAt(buf []byte, off int64, name string) error {
	if _, err := st.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("%s: reading tensor %q: %w", filepath.Base(st.Path), name, err)
	}
	return nil
}

// Decode converts little-endian raw data of dtype (DTypeF32, DTypeBF16 or
// DTypeF16) to float32, exactly. It panics on any other dtype.
func Decode(buf []byte, dtype string) []float32 {
	switch dtype {
	case DTypeF32:
		out := make([]float32, len(buf)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		return out
	case DTypeBF16:
		out := make([]float32, len(buf)/2)
		for i := range out {
			out[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(buf[2*i:]))
		}
		return out
	case DTypeF16:
		out := make([]float32, len(buf)/2)
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(buf[2*i:]))
		}
		return out
	}
	panic("model: Decode of unsupported dtype " + dtype)
}

// HostTensor is a tensor in host memory, as float32 whatever its on-disk
// dtype. DType is the dtype it was read from or is to be written as.
type HostTensor struct {
	Name  string
	DType string
	Shape []int
	Data  []float32
}
