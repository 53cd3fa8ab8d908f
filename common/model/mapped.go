package model

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"unsafe"

	"kvlab/kernels"
)

// hostBorrower is a backend whose tensors can be host memory they do not
// own (the CPU backend's WrapHost and WrapBF16). Load then makes a weight
// of the checkpoint's own bytes where the file is mapped, and of the one
// buffer it decoded or read otherwise: never a second copy.
type hostBorrower interface {
	WrapHost(rows, cols int, data []float32) kernels.Tensor
	WrapBF16(rows, cols int, bits []uint16) kernels.Tensor
}

// hostLittleEndian is whether this machine's byte order is the file's:
// only then can mapped bytes be used as numbers as they are.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// elements returns tensor ti's elements as T: float32 for an F32 tensor,
// uint16 bit patterns for a BF16 or F16 one. When the file is mapped, the
// host little-endian and the data aligned for T, the result is the mapping
// itself (mapped is true; valid until st is closed). Otherwise it is a new
// slice holding a copy (a safetensors header of any length may leave the
// data at an odd offset).
func elements[T float32 | uint16](st *SafetensorsFile, ti TensorInfo) (v []T, mapped bool, err error) {
	var zero T
	size := int64(unsafe.Sizeof(zero))
	if es, ok := dtypeSize(ti.DType); !ok || int64(es) != size {
		return nil, false, fmt.Errorf("%s: tensor %q has dtype %q, not %d-byte elements", filepath.Base(st.Path), ti.Name, ti.DType, size)
	}
	n := ti.NumElements()
	if n == 0 {
		return []T{}, false, nil
	}
	lo := st.dataOff + ti.DataOffsets[0]
	if st.mm != nil {
		p := unsafe.Pointer(&st.mm[lo])
		if hostLittleEndian && uintptr(p)%uintptr(size) == 0 {
			return unsafe.Slice((*T)(p), n), true, nil
		}
	}
	v = make([]T, n)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), n*size)
	switch {
	case st.mm != nil:
		copy(b, st.mm[lo:lo+n*size])
	case st.f != nil:
		if err := st.readAt(b, lo, ti.Name); err != nil {
			return nil, false, err
		}
	default:
		return nil, false, fmt.Errorf("%s: reading tensor %q: file already closed", filepath.Base(st.Path), ti.Name)
	}
	if !hostLittleEndian {
		for i := int64(0); i < int64(len(b)); i += size {
			for j, k := i, i+size-1; j < k; j, k = j+1, k-1 {
				b[j], b[k] = b[k], b[j]
			}
		}
	}
	return v, false, nil
}
