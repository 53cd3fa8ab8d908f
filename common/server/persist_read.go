package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"kvlab/common/cachefile"
	"kvlab/common/kvcache"
	"kvlab/kernels"
)

// savedFile is a file that passed every check, open for the KV reads of
// commit. Close it when done.
type savedFile struct {
	f      *os.File
	size   int64
	blocks []cachefile.Record
}

func (s *savedFile) Close() error { return s.f.Close() }

// load opens the file at path and checks it (scan); it returns
// ErrNoCacheFile when there is no file, and an error naming the path and
// the check for a file it refuses.
func (c *CacheFile) load(path string) (*savedFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCacheFile
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	var blocks []cachefile.Record
	if err == nil {
		blocks, err = c.scan(f, st.Size())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("refusing %s: %w", path, err)
	}
	return &savedFile{f: f, size: st.Size(), blocks: blocks}, nil
}

// scan checks a file of size bytes read through r against c's identity
// and returns its records, without their KV (cachefile.Scan): the checksum
// before anything else is believed, then the header and each record's
// hash, parent and tokens, with every count the file states checked
// against the bytes there are before anything is allocated for it.
func (c *CacheFile) scan(r io.ReaderAt, size int64) ([]cachefile.Record, error) {
	_, blocks, err := cachefile.Scan(r, size, c.Identity)
	return blocks, err
}

// blockDecoder writes one layer of one saved block into the pool, reading
// its bytes from the file into buffers it reuses from block to block: a
// restore holds one layer of one block at a time. It does what
// kvcache.Pool.WriteBlockBytes does.
type blockDecoder struct {
	pool *kvcache.Pool
	raw  []byte
	kv   []float32
}

func newBlockDecoder(p *kvcache.Pool) *blockDecoder {
	return &blockDecoder{pool: p, raw: make([]byte, p.BlockBytes()), kv: make([]float32, 2*p.BlockSize()*p.KVDim())}
}

// write reads layer l's K and V at offset at of r and stores them as
// layer l's KV of block b, which PrepareWrite made private.
func (d *blockDecoder) write(r io.ReaderAt, at int64, l int, b int32) error {
	if _, err := r.ReadAt(d.raw, at); err != nil {
		return fmt.Errorf("reading a block's KV: %w", err)
	}
	switch d.pool.DType() {
	case kernels.KVF32:
		for i := range d.kv {
			d.kv[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.raw[4*i:]))
		}
	case kernels.KVBF16:
		for i := range d.kv {
			d.kv[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(d.raw[2*i:]))
		}
	case kernels.KVF16:
		for i := range d.kv {
			d.kv[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(d.raw[2*i:]))
		}
	}
	n := len(d.kv) / 2
	return d.pool.WriteBlock(l, b, d.kv[:n], d.kv[n:])
}
