package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Writer writes a GGUF file: NewWriter writes the header (metadata and
// tensor infos) and WriteTensor then streams each tensor's data in the
// order the infos listed them, so a model is never held in memory whole.
type Writer struct {
	w     *bufio.Writer
	infos []TensorInfo
	align uint64
	next  int    // index of the next tensor to write
	pos   uint64 // bytes written so far
	data  uint64 // file offset of the data section
	err   error
}

// NewWriter writes the header of a file with metadata kv and tensors
// (whose Offset fields it ignores: it lays the tensors out one after the
// other, each at the next multiple of the alignment). The alignment is
// kv's general.alignment (a uint32) if present, else DefaultAlignment.
// Tensor names must be unique and types ones this package handles.
func NewWriter(w io.Writer, kv []KV, tensors []TensorInfo) (*Writer, error) {
	gw := &Writer{w: bufio.NewWriterSize(w, 1<<20), align: DefaultAlignment}
	seenKey := map[string]bool{}
	for _, e := range kv {
		if seenKey[e.Key] {
			return nil, fmt.Errorf("gguf: metadata key %q appears twice", e.Key)
		}
		seenKey[e.Key] = true
		if e.Key == "general.alignment" {
			a, ok := e.Value.(uint32)
			if !ok || a == 0 || a%8 != 0 {
				return nil, fmt.Errorf("gguf: general.alignment must be a uint32 multiple of 8, have %v (%T)", e.Value, e.Value)
			}
			gw.align = uint64(a)
		}
	}
	seen := map[string]bool{}
	var off uint64
	for _, ti := range tensors {
		if seen[ti.Name] {
			return nil, fmt.Errorf("gguf: tensor %q appears twice", ti.Name)
		}
		seen[ti.Name] = true
		if ti.Type.ElemSize() == 0 {
			return nil, fmt.Errorf("gguf: tensor %q: type %v is not supported", ti.Name, ti.Type)
		}
		if len(ti.Dims) == 0 || len(ti.Dims) > 4 {
			return nil, fmt.Errorf("gguf: tensor %q has %d dims; want 1 to 4", ti.Name, len(ti.Dims))
		}
		ti.Dims = append([]uint64(nil), ti.Dims...)
		ti.Offset = off
		gw.infos = append(gw.infos, ti)
		off = pad(off+ti.Size(), gw.align)
	}

	gw.raw([]byte(Magic))
	gw.u32(Version)
	gw.u64(uint64(len(tensors)))
	gw.u64(uint64(len(kv)))
	for _, e := range kv {
		t, elem, err := valueType(e.Value)
		if err != nil {
			return nil, fmt.Errorf("%w (key %q)", err, e.Key)
		}
		gw.str(e.Key)
		gw.u32(uint32(t))
		if t == TypeArray {
			gw.u32(uint32(elem))
		}
		gw.value(e.Value)
	}
	for _, ti := range gw.infos {
		gw.str(ti.Name)
		gw.u32(uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			gw.u64(d)
		}
		gw.u32(uint32(ti.Type))
		gw.u64(ti.Offset)
	}
	// The data section starts at the next multiple of the alignment (a
	// file with no tensors has none, and no padding).
	if len(gw.infos) > 0 {
		gw.zeros(pad(gw.pos, gw.align) - gw.pos)
	}
	gw.data = gw.pos
	if gw.err != nil {
		return nil, gw.err
	}
	return gw, nil
}

// Tensors returns the tensor infos with the offsets the writer assigned.
func (w *Writer) Tensors() []TensorInfo { return append([]TensorInfo(nil), w.infos...) }

// WriteTensor writes the data of the next tensor, which must be named name
// and hold exactly its Size() bytes.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.next >= len(w.infos) {
		return fmt.Errorf("gguf: WriteTensor(%q): all %d tensors are written", name, len(w.infos))
	}
	ti := w.infos[w.next]
	if ti.Name != name {
		return fmt.Errorf("gguf: WriteTensor(%q): the next tensor is %q", name, ti.Name)
	}
	if uint64(len(data)) != ti.Size() {
		return fmt.Errorf("gguf: WriteTensor(%q): %d bytes; a %v tensor of dims %v holds %d", name, len(data), ti.Type, ti.Dims, ti.Size())
	}
	w.raw(data)
	rel := w.pos - w.data
	w.zeros(pad(rel, w.align) - rel)
	w.next++
	return w.err
}

// Close flushes the file. It fails if a tensor was not written.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.next != len(w.infos) {
		return fmt.Errorf("gguf: Close: %d of %d tensors written", w.next, len(w.infos))
	}
	return w.w.Flush()
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

func (w *Writer) raw(b []byte) {
	if w.err != nil {
		return
	}
	_, w.err = w.w.Write(b)
	w.pos += uint64(len(b))
}

func (w *Writer) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		w.raw(z[:k])
		n -= k
	}
}

func (w *Writer) u32(v uint32) { w.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *Writer) u64(v uint64) { w.raw(binary.LittleEndian.AppendUint64(nil, v)) }

func (w *Writer) str(s string) {
	w.u64(uint64(len(s)))
	w.raw([]byte(s))
}

// value writes a value's encoding (for an array: the count and the
// elements; the caller wrote the type tags).
func (w *Writer) value(v any) {
	le := binary.LittleEndian
	var b []byte
	switch x := v.(type) {
	case uint8:
		b = []byte{x}
	case int8:
		b = []byte{byte(x)}
	case uint16:
		b = le.AppendUint16(nil, x)
	case int16:
		b = le.AppendUint16(nil, uint16(x))
	case uint32:
		b = le.AppendUint32(nil, x)
	case int32:
		b = le.AppendUint32(nil, uint32(x))
	case float32:
		b = le.AppendUint32(nil, math.Float32bits(x))
	case bool:
		b = []byte{0}
		if x {
			b[0] = 1
		}
	case string:
		w.str(x)
		return
	case uint64:
		b = le.AppendUint64(nil, x)
	case int64:
		b = le.AppendUint64(nil, uint64(x))
	case float64:
		b = le.AppendUint64(nil, math.Float64bits(x))
	case []string:
		w.u64(uint64(len(x)))
		for _, s := range x {
			w.str(s)
		}
		return
	default:
		writeArray(w, v)
		return
	}
	w.raw(b)
}

// writeArray writes the count and elements of a slice of fixed-size
// scalars.
func writeArray(w *Writer, v any) {
	switch x := v.(type) {
	case []uint8:
		arr(w, x)
	case []int8:
		arr(w, x)
	case []uint16:
		arr(w, x)
	case []int16:
		arr(w, x)
	case []uint32:
		arr(w, x)
	case []int32:
		arr(w, x)
	case []float32:
		arr(w, x)
	case []bool:
		arr(w, x)
	case []uint64:
		arr(w, x)
	case []int64:
		arr(w, x)
	case []float64:
		arr(w, x)
	}
}

func arr[T any](w *Writer, xs []T) {
	w.u64(uint64(len(xs)))
	for _, x := range xs {
		w.value(x)
	}
}
