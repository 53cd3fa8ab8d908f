package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"kvlab/common/model"
)

// File is a parsed GGUF file: its metadata and tensor infos, with the
// tensor data read on demand.
type File struct {
	Version    uint32
	KV         []KV         // in file order
	Tensors    []TensorInfo // in file order
	Alignment  uint64
	DataOffset int64 // file offset of the data section

	r      io.ReaderAt
	closer io.Closer
	byName map[string]int
	kvIdx  map[string]int
}

// Open opens and parses the GGUF file at path. Close it when done.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	g, err := Parse(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	g.closer = f
	return g, nil
}

// Close closes the file Open opened (a no-op after Parse).
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// errTruncated reports a file that ends inside its header.
var errTruncated = errors.New("gguf: truncated header")

// reader decodes the header, counting bytes and refusing lengths that
// could not fit in what is left of the file.
type reader struct {
	br   *bufio.Reader
	pos  int64
	size int64
	err  error
}

func (r *reader) read(n int64) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.size-r.pos {
		r.err = errTruncated
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		r.err = errTruncated
		return nil
	}
	r.pos += n
	return b
}

func (r *reader) u8() uint8 {
	if b := r.read(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.read(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.read(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.read(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string {
	n := r.u64()
	if n > uint64(r.size) {
		r.err = errTruncated
		return ""
	}
	return string(r.read(int64(n)))
}

// count reads an element count and checks that that many elements of at
// least minSize bytes fit in the rest of the file.
func (r *reader) count(minSize int64) int {
	n := r.u64()
	if r.err == nil && (n > uint64(r.size) || int64(n)*minSize > r.size-r.pos) {
		r.err = errTruncated
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// scalar reads one value of a scalar type.
func (r *reader) scalar(t ValueType) (any, error) {
	switch t {
	case TypeUint8:
		return r.u8(), nil
	case TypeInt8:
		return int8(r.u8()), nil
	case TypeUint16:
		return r.u16(), nil
	case TypeInt16:
		return int16(r.u16()), nil
	case TypeUint32:
		return r.u32(), nil
	case TypeInt32:
		return int32(r.u32()), nil
	case TypeFloat32:
		return math.Float32frombits(r.u32()), nil
	case TypeBool:
		b := r.u8()
		if r.err == nil && b > 1 {
			return nil, fmt.Errorf("gguf: bool value %d", b)
		}
		return b == 1, nil
	case TypeString:
		return r.str(), nil
	case TypeUint64:
		return r.u64(), nil
	case TypeInt64:
		return int64(r.u64()), nil
	case TypeFloat64:
		return math.Float64frombits(r.u64()), nil
	}
	return nil, fmt.Errorf("gguf: unknown value type %d", uint32(t))
}

// array reads the count and elements of an array of elem, as a typed
// slice.
func (r *reader) array(elem ValueType) (any, error) {
	switch elem {
	case TypeArray:
		return nil, fmt.Errorf("gguf: arrays of arrays are not supported")
	case TypeString:
		n := r.count(8)
		out := make([]string, 0, n)
		for range n {
			out = append(out, r.str())
		}
		return out, nil
	}
	size := int64(elem.scalarSize())
	if size == 0 {
		return nil, fmt.Errorf("gguf: unknown array element type %d", uint32(elem))
	}
	n := r.count(size)
	switch elem {
	case TypeUint8:
		return readArr[uint8](r, n, elem)
	case TypeInt8:
		return readArr[int8](r, n, elem)
	case TypeUint16:
		return readArr[uint16](r, n, elem)
	case TypeInt16:
		return readArr[int16](r, n, elem)
	case TypeUint32:
		return readArr[uint32](r, n, elem)
	case TypeInt32:
		return readArr[int32](r, n, elem)
	case TypeFloat32:
		return readArr[float32](r, n, elem)
	case TypeBool:
		return readArr[bool](r, n, elem)
	case TypeUint64:
		return readArr[uint64](r, n, elem)
	case TypeInt64:
		return readArr[int64](r, n, elem)
	default: // TypeFloat64
		return readArr[float64](r, n, elem)
	}
}

func readArr[T any](r *reader, n int, elem ValueType) (any, error) {
	out := make([]T, n)
	for i := range out {
		v, err := r.scalar(elem)
		if err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		out[i] = v.(T)
	}
	return out, nil
}

// Parse parses the header of a GGUF file of size bytes read through r and
// checks that every tensor's data lies inside the file.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	rd := &reader{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	if magic := rd.read(4); rd.err != nil || string(magic) != Magic {
		return nil, fmt.Errorf("gguf: not a GGUF file (magic %q)", magic)
	}
	f := &File{Version: rd.u32(), Alignment: DefaultAlignment, r: r, byName: map[string]int{}, kvIdx: map[string]int{}}
	if rd.err == nil && f.Version != Version {
		return nil, fmt.Errorf("gguf: version %d; this reader handles %d", f.Version, Version)
	}
	nTensors := rd.count(8 + 4 + 4 + 8) // name length, n_dims, type, offset
	nKV := rd.count(8 + 4)
	for range nKV {
		key := rd.str()
		t := ValueType(rd.u32())
		if rd.err != nil {
			return nil, rd.err
		}
		var v any
		var err error
		if t == TypeArray {
			elem := ValueType(rd.u32())
			v, err = rd.array(elem)
		} else {
			v, err = rd.scalar(t)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (key %q)", err, key)
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if _, dup := f.kvIdx[key]; dup {
			return nil, fmt.Errorf("gguf: metadata key %q appears twice", key)
		}
		f.kvIdx[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
		if key == "general.alignment" {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("gguf: general.alignment is %v (%T); want a power of two as uint32", v, v)
			}
			f.Alignment = uint64(a)
		}
	}
	for range nTensors {
		ti := TensorInfo{Name: rd.str()}
		nd := rd.u32()
		if rd.err == nil && (nd == 0 || nd > 4) {
			return nil, fmt.Errorf("gguf: tensor %q has %d dims; want 1 to 4", ti.Name, nd)
		}
		for range nd {
			ti.Dims = append(ti.Dims, rd.u64())
		}
		ti.Type = TensorType(rd.u32())
		ti.Offset = rd.u64()
		if rd.err != nil {
			return nil, rd.err
		}
		if _, dup := f.byName[ti.Name]; dup {
			return nil, fmt.Errorf("gguf: tensor %q appears twice", ti.Name)
		}
		f.byName[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	if rd.err != nil {
		return nil, rd.err
	}
	f.DataOffset = rd.pos
	if len(f.Tensors) > 0 {
		f.DataOffset = int64(pad(uint64(rd.pos), f.Alignment))
	}
	for _, ti := range f.Tensors {
		if ti.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("gguf: tensor %q at offset %d, not a multiple of the alignment %d", ti.Name, ti.Offset, f.Alignment)
		}
		for _, d := range ti.Dims {
			if d > uint64(size) {
				return nil, fmt.Errorf("gguf: tensor %q has dims %v, larger than the file", ti.Name, ti.Dims)
			}
		}
		if ti.Type.ElemSize() == 0 {
			continue // a quantized tensor: its size is not checked here, nor can it be read
		}
		if end := uint64(f.DataOffset) + ti.Offset + ti.Size(); ti.NumElements() > uint64(size) || end > uint64(size) {
			return nil, fmt.Errorf("gguf: truncated: tensor %q ends at byte %d of a %d-byte file", ti.Name, end, size)
		}
	}
	return f, nil
}

// Value returns the value of a metadata key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.kvIdx[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the info of the tensor named name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// ReadTensor returns the raw little-endian bytes of tensor name.
func (f *File) ReadTensor(name string) ([]byte, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	if ti.Type.ElemSize() == 0 {
		return nil, fmt.Errorf("gguf: tensor %q has type %v, which this package does not read", name, ti.Type)
	}
	buf := make([]byte, ti.Size())
	if _, err := f.r.ReadAt(buf, f.DataOffset+int64(ti.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: reading tensor %q: %w", name, err)
	}
	return buf, nil
}

// ReadFloat32 returns tensor name widened to float32 (exactly: every F16
// and BF16 value is a float32 value).
func (f *File) ReadFloat32(name string) ([]float32, error) {
	b, err := f.ReadTensor(name)
	if err != nil {
		return nil, err
	}
	ti, _ := f.Tensor(name)
	// ReadTensor took only F32, F16 and BF16, whose names are safetensors'.
	return model.Decode(b, ti.Type.String()), nil
}
