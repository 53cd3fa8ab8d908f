// Package gguf reads and writes GGUF files, the single-file model format of
// llama.cpp (and ollama), and exports a HuggingFace-layout checkpoint that
// package model loads as a GGUF file llama.cpp can run.
//
// A GGUF file (version 3) is, all little-endian:
//
//	"GGUF"                     4 bytes of magic
//	version                    uint32, 3
//	tensor count               uint64
//	key-value count            uint64
//	key-values                 key (string), value type (uint32), value
//	tensor infos               name (string), n_dims (uint32),
//	                           dims (n_dims × uint64, fastest-varying first),
//	                           ggml type (uint32), offset (uint64)
//	padding                    to general.alignment (32 when absent)
//	tensor data                each tensor at its offset from here, each
//	                           offset a multiple of the alignment
//
// A string is a uint64 byte count and the bytes, with no terminator. An
// array value is the element type (uint32), the element count (uint64) and
// the elements. A tensor's dims run the other way round from PyTorch's
// shape: a HuggingFace Linear weight of shape [out, in] has dims [in, out],
// and its bytes are the same row-major bytes.
package gguf

import (
	"fmt"
	"math"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version this package writes and reads.
const Version = 3

// DefaultAlignment is the alignment of tensor data when the file has no
// general.alignment key.
const DefaultAlignment = 32

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, numbered as in the format.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// scalarSize is the encoded size of a fixed-size scalar type (0 for
// string and array).
func (t ValueType) scalarSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// TensorType is ggml's element type of a tensor. This package handles the
// unquantized float types a HuggingFace checkpoint holds.
type TensorType uint32

// Tensor element types, numbered as in ggml.h.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	BF16 TensorType = 30
)

func (t TensorType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// ElemSize is the size in bytes of one element, or 0 for a type this
// package does not handle (quantized types, whose elements come in blocks).
func (t TensorType) ElemSize() int {
	switch t {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// KV is one metadata key and its value. A value is one of uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, or a slice of one of them ([]string included).
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor: its name, its dims (fastest-varying
// first, so a row of a matrix is Dims[0] elements long), its element type
// and where its data starts, relative to the data section.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Offset uint64
}

// NumElements is the product of the dims.
func (ti TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	return n
}

// Size is the tensor's data size in bytes (0 for unhandled types).
func (ti TensorInfo) Size() uint64 {
	return ti.NumElements() * uint64(ti.Type.ElemSize())
}

// valueType returns the type tag of a metadata value, and for an array the
// type of its elements.
func valueType(v any) (t, elem ValueType, err error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	}
	return 0, 0, fmt.Errorf("gguf: unsupported metadata value of type %T", v)
}

// BF16Bits returns the bfloat16 encoding of f, which must be exactly
// representable (a value widened from bfloat16); ok is false otherwise.
func BF16Bits(f float32) (h uint16, ok bool) {
	b := math.Float32bits(f)
	return uint16(b >> 16), b&0xffff == 0
}
