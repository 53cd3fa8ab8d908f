package kvevents

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// The pickle encoder behind the sha256 and xxhash block hashes.
//
// vLLM's pickle-based algorithms hash pickle.dumps(obj, protocol=5) of a
// block's (parent, tuple(token_ids), extra_keys), and of the PYTHONHASHSEED
// string for the root. To hash the same bytes this file writes exactly what
// CPython's pickler writes for those few types — no general pickler, only
// the opcodes such an object produces:
//
//	PROTO 5                         first, outside any frame
//	bytes   SHORT_BINBYTES (≤ 255 bytes), BINBYTES, BINBYTES8; then MEMOIZE
//	str     SHORT_BINUNICODE (≤ 255 UTF-8 bytes), BINUNICODE, BINUNICODE8;
//	        then MEMOIZE
//	int     BININT1 (0..255), BININT2 (256..65535), BININT (the rest of
//	        int32, little-endian), else LONG1: the fewest little-endian
//	        two's-complement bytes that hold it; ints are never memoized
//	None    NONE
//	tuple   EMPTY_TUPLE for (), not memoized; 1 to 3 items: the items, then
//	        TUPLE1/2/3 and MEMOIZE; more: MARK, the items, TUPLE, MEMOIZE
//	STOP    last
//
// Memoizing: MEMOIZE gives each memoized object the next index; an object
// pickled a second time is written as BINGET of its index. Objects are
// compared by identity, so only one case arises here: CPython keeps a
// single object for "" and for every one-character string below U+0100, so
// a LoRA name and a salt that are both, say, "a" are one object and the
// second is a BINGET. Longer equal strings made at run time are distinct
// objects and are written twice.
//
// Framing (protocol 4 and up): opcodes after PROTO go into frames, each
// preceded by FRAME and its length as 8 little-endian bytes. Before each
// object is pickled, a frame already holding 64 KiB or more is closed and
// the next write opens a new one; the last frame is closed after STOP. A
// frame of fewer than 4 bytes is written without its FRAME header. A bytes
// or str payload of 64 KiB or more is written outside any frame: the open
// frame is closed, then the opcode, its length and the payload follow
// directly. Python's pickle.py (_Framer) and its C accelerator agree on
// these rules; scripts/vllm_block_hashes.py records bytes for each of them.
const (
	pkProto           = 0x80
	pkFrame           = 0x95
	pkStop            = '.'
	pkNone            = 'N'
	pkBinInt          = 'J'
	pkBinInt1         = 'K'
	pkBinInt2         = 'M'
	pkLong1           = 0x8a
	pkShortBinBytes   = 'C'
	pkBinBytes        = 'B'
	pkBinBytes8       = 0x8e
	pkShortBinUnicode = 0x8c
	pkBinUnicode      = 'X'
	pkBinUnicode8     = 0x8d
	pkEmptyTuple      = ')'
	pkMark            = '('
	pkTuple           = 't'
	pkTuple1          = 0x85
	pkTuple2          = 0x86
	pkTuple3          = 0x87
	pkMemoize         = 0x94
	pkBinGet          = 'h'
	pkLongBinGet      = 'j'

	pickleProtocol    = 5
	pickleFrameTarget = 64 << 10 // a frame this full is closed before the next object
	pickleFrameMin    = 4        // a shorter frame goes without its header
	pickleFrameHeader = 9        // FRAME + uint64 length
)

// pickler writes one protocol-5 pickle into out.
type pickler struct {
	out        []byte
	frameStart int // offset in out of the open frame's header; -1 when no frame is open
	memo       int // objects memoized so far: the next MEMOIZE's index
}

func newPickler(size int) *pickler {
	p := &pickler{out: make([]byte, 0, 2+pickleFrameHeader+size+1), frameStart: -1}
	p.out = append(p.out, pkProto, pickleProtocol)
	return p
}

// open makes sure a frame is open for the next opcode.
func (p *pickler) open() {
	if p.frameStart < 0 {
		p.frameStart = len(p.out)
		p.out = append(p.out, make([]byte, pickleFrameHeader)...)
	}
}

// commit closes the open frame, filling in its header, or dropping the
// header from a frame too short to carry one.
func (p *pickler) commit() {
	if p.frameStart < 0 {
		return
	}
	n := len(p.out) - p.frameStart - pickleFrameHeader
	if n >= pickleFrameMin {
		p.out[p.frameStart] = pkFrame
		binary.LittleEndian.PutUint64(p.out[p.frameStart+1:], uint64(n))
	} else {
		copy(p.out[p.frameStart:], p.out[p.frameStart+pickleFrameHeader:])
		p.out = p.out[:len(p.out)-pickleFrameHeader]
	}
	p.frameStart = -1
}

// object marks the start of one object's pickle, where the pickler closes
// a full frame.
func (p *pickler) object() {
	if p.frameStart >= 0 && len(p.out)-p.frameStart-pickleFrameHeader >= pickleFrameTarget {
		p.commit()
	}
}

func (p *pickler) op(b ...byte) {
	p.open()
	p.out = append(p.out, b...)
}

func (p *pickler) memoize() {
	p.op(pkMemoize)
	p.memo++
}

// payload writes a bytes or str opcode: short form, 4-byte length, or
// 8-byte length, and a large payload outside any frame.
func (p *pickler) payload(short, long4, long8 byte, data string) {
	n := len(data)
	switch {
	case n <= 0xff:
		p.op(short, byte(n))
		p.out = append(p.out, data...)
	case uint64(n) > math.MaxUint32:
		p.commit()
		p.out = append(p.out, long8)
		p.out = binary.LittleEndian.AppendUint64(p.out, uint64(n))
		p.out = append(p.out, data...)
	case n >= pickleFrameTarget:
		p.commit()
		p.out = append(p.out, long4)
		p.out = binary.LittleEndian.AppendUint32(p.out, uint32(n))
		p.out = append(p.out, data...)
	default:
		p.op(long4)
		p.out = binary.LittleEndian.AppendUint32(p.out, uint32(n))
		p.out = append(p.out, data...)
	}
	p.memoize()
}

func (p *pickler) bytes(b []byte) {
	p.object()
	p.payload(pkShortBinBytes, pkBinBytes, pkBinBytes8, string(b))
}

func (p *pickler) str(s string) {
	p.object()
	p.payload(pkShortBinUnicode, pkBinUnicode, pkBinUnicode8, s)
}

// get writes a reference to memoized object i.
func (p *pickler) get(i int) {
	p.object()
	if i < 256 {
		p.op(pkBinGet, byte(i))
		return
	}
	p.op(pkLongBinGet)
	p.out = binary.LittleEndian.AppendUint32(p.out, uint32(i))
}

func (p *pickler) none() {
	p.object()
	p.op(pkNone)
}

func (p *pickler) int(v int64) {
	p.object()
	switch {
	case v >= 0 && v <= 0xff:
		p.op(pkBinInt1, byte(v))
	case v >= 0 && v <= 0xffff:
		p.op(pkBinInt2, byte(v), byte(v>>8))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(pkBinInt)
		p.out = binary.LittleEndian.AppendUint32(p.out, uint32(int32(v)))
	default:
		n := 5 // more than BININT's 4 bytes, or it would have fit
		for n < 8 && (v < -(1<<(8*n-1)) || v >= 1<<(8*n-1)) {
			n++
		}
		p.op(pkLong1, byte(n))
		var le [8]byte
		binary.LittleEndian.PutUint64(le[:], uint64(v))
		p.out = append(p.out, le[:n]...)
	}
}

// tupleStart and tupleEnd bracket the items of a tuple of n > 0 items.
func (p *pickler) tupleStart(n int) {
	p.object()
	if n > 3 {
		p.op(pkMark)
	}
}

func (p *pickler) tupleEnd(n int) {
	switch n {
	case 1:
		p.op(pkTuple1)
	case 2:
		p.op(pkTuple2)
	case 3:
		p.op(pkTuple3)
	default:
		p.op(pkTuple)
	}
	p.memoize()
}

func (p *pickler) done() []byte {
	p.op(pkStop)
	p.commit()
	return p.out
}

// shared reports whether CPython holds s as its one shared object for that
// value: "" and one-character strings below U+0100.
func shared(s string) bool {
	if s == "" {
		return true
	}
	r, n := utf8.DecodeRuneInString(s)
	return n == len(s) && r != utf8.RuneError && r < 0x100
}

// pickleBlock returns pickle.dumps((parent, tuple(tokens), extra),
// protocol=5), extra being None when empty, as vLLM passes it.
func pickleBlock[T int32 | int64](parent []byte, tokens []T, extra []string) []byte {
	size := len(parent) + 8 + 6*len(tokens) + 16
	for _, s := range extra {
		size += len(s) + 12
	}
	p := newPickler(size)
	p.tupleStart(3)
	p.bytes(parent)
	if len(tokens) == 0 {
		p.object()
		p.op(pkEmptyTuple)
	} else {
		p.tupleStart(len(tokens))
		for _, t := range tokens {
			p.int(int64(t))
		}
		p.tupleEnd(len(tokens))
	}
	if len(extra) == 0 {
		p.none()
	} else {
		p.tupleStart(len(extra))
		var seen map[string]int // memo index of each shared string already written
		for _, s := range extra {
			if shared(s) {
				if i, ok := seen[s]; ok {
					p.get(i)
					continue
				}
				if seen == nil {
					seen = make(map[string]int)
				}
				seen[s] = p.memo
			}
			p.str(s)
		}
		p.tupleEnd(len(extra))
	}
	p.tupleEnd(3)
	return p.done()
}

// pickleString returns pickle.dumps(s, protocol=5).
func pickleString(s string) []byte {
	p := newPickler(len(s) + 12)
	p.str(s)
	return p.done()
}
