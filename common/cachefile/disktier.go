package cachefile

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/kernels"
)

// DiskTier is a kvcache.Tier on a directory under a byte budget, the store
// behind --cache-disk DIR and --cache-disk-size MiB (common/cli/tiers.go):
// under a RAMTier, as its Next, it keeps what host memory evicts, and a
// server that restarts on the same directory finds it warm.
//
// Each block is one file, named by its hash, that is a cache file of this
// package's format holding one record: the header (the identity, the hash
// seed, blocks: 1), the record (hash, parent, tokens, every layer's K and V
// in the pool's dtype) and the SHA-256 trailer. Whatever reads --cache-dir
// files (Scan, the server's CacheFile) reads a block file too.
//
// The directory may be shared with servers of other models, block sizes,
// dtypes, hash seeds or algorithms, or hold garbage. A tier keeps its
// blocks in the subdirectory IdentityDir names, a digest of its identity
// and seed, and never reads, counts, evicts or overwrites a file outside
// it. Inside it, a file that fails a check (its size, its checksum, its
// identity or seed, a record whose hash is not the hash of its tokens or
// not the hash its name says) is set aside (SetAside: renamed, never
// deleted or overwritten), counted in TierStats.Corrupt and never
// promoted; something that is not a regular file under a block's name is
// left alone, and that name is never written.
//
// The engine never waits on the disk: Put queues the block for the tier's
// writer goroutine, a queue bounded in blocks and bytes that drops (and
// counts in TierStats.Dropped) what does not fit. The writer writes each
// file to a temporary name, syncs it and renames it into place, so a crash
// leaves no torn record under a block's name (Open removes the temporary
// files a crash left). Has and Get see queued blocks, from memory; Get
// reads and checks a block's file synchronously, on the engine's goroutine,
// which the pool's promotion rule pays only while a block from this tier
// costs less than computing its rows.
//
// Eviction is LRU by last use (a Put, a Get), within the budget of the
// files' sizes; a file's modification time records its last use, so a
// restart keeps the order. That is what the systems this repository
// follows do at this level: vLLM's CPU offloading evicts LRU by default
// (its eviction_policy "lru"; "arc" is the other), SGLang's host cache
// evicts host-memory leaves by its radix eviction policy, "lru" by
// default, and LMCache's local disk backend, one file per KV chunk as here,
// evicts LRU when over its capacity. A block comes down to the disk after
// the pool and host memory evicted it, the least useful twice over; when
// it is used again is all the tier learns of it.
//
// Blocks cached under a cache salt are not stored (counted as Dropped):
// the format records no salt, and a reader of the file would take a
// tenant's block for an unsalted one.
//
// Its methods are safe for concurrent use.
type DiskTier struct {
	dir         string
	id          Identity
	seed        string
	hasher      kvevents.Hasher
	capacity    int64
	maxQueue    int
	maxQueueB   int64
	flushWait   time.Duration
	lead        []byte // magic, header length, header: every block file's first bytes
	fileBytes   int64  // every block file's size
	beforeWrite func(kvevents.Hash)

	sink     func(kvevents.Event) // SetEventSink's; nil: no events
	mu       sync.Mutex
	lru      *list.List // of kvevents.Hash, files on disk, most recent first
	byHash   map[kvevents.Hash]*list.Element
	bytes    int64 // the files' bytes, and those of the one being written
	writing  bool  // a file's bytes are counted before it is written
	pending  map[kvevents.Hash]*kvcache.TierBlock
	queue    []kvevents.Hash // pending blocks the writer has not taken yet, oldest first
	touch    map[kvevents.Hash]bool
	blocked  map[kvevents.Hash]bool // names not the tier's to write
	stats    kvcache.TierStats
	closing  bool
	stopped  bool
	idle     chan struct{} // closed while nothing is pending
	wake     chan struct{}
	done     chan struct{}
	setAside []string
}

// DiskTierConfig configures OpenDiskTier.
type DiskTierConfig struct {
	// Dir is the directory, which other servers may share: the tier keeps
	// its blocks in its subdirectory IdentityDir(Identity, Seed).
	Dir string
	// Capacity is the byte budget of the tier's block files.
	Capacity int64
	// Identity is the pool's (its model, block size, layers, KV width and
	// dtype, and how its observer names blocks) and Seed its observer's
	// hash seed: blocks are looked up by the hashes they make.
	Identity Identity
	Seed     string
	// QueueBlocks and QueueBytes bound the blocks waiting for the writer
	// (0: DefaultQueueBlocks, DefaultQueueBytes); past either, a Put is
	// dropped.
	QueueBlocks int
	QueueBytes  int64
	// FlushWait bounds how long Close waits for the queue (0:
	// DefaultFlushWait).
	FlushWait time.Duration

	beforeWrite func(kvevents.Hash) // a test hook: runs on the writer before each block's file is written
}

// The defaults of DiskTierConfig.
const (
	DefaultQueueBlocks = 64
	DefaultQueueBytes  = 256 << 20
	DefaultFlushWait   = 10 * time.Second
)

// BlockExt ends the name of a block's file, after its hash in hex.
const BlockExt = ".kv"

// IdentityDir names the subdirectory of the blocks of identity id under
// hash seed seed: "kv-" and the first 12 bytes, in hex, of the SHA-256 of
// their header (MarshalHeader, no blocks).
func IdentityDir(id Identity, seed string) string {
	hdr, _ := MarshalHeader(id, seed, 0) // of strings and numbers: it never fails
	sum := sha256.Sum256(hdr)
	return "kv-" + hex.EncodeToString(sum[:12])
}

var errNotRegular = errors.New("not a regular file")

// OpenDiskTier opens the tier of cfg.Identity in cfg.Dir, creating its
// subdirectory if need be. It removes the temporary files a crash left
// there, indexes the block files (each one's size, header and record head:
// work bounded per file, the KV is checked when a Get reads it), sets
// aside those that fail, orders the rest by modification time and, over
// the budget, evicts the oldest. Then it starts the writer; Close stops
// it.
func OpenDiskTier(cfg DiskTierConfig) (*DiskTier, error) {
	id := cfg.Identity
	if _, err := kernels.ParseKVDType(id.DType); err != nil {
		return nil, fmt.Errorf("cachefile: a disk tier for KV of dtype %q: %w", id.DType, err)
	}
	switch {
	case cfg.Dir == "":
		return nil, errors.New("cachefile: a disk tier needs a directory")
	case cfg.Capacity <= 0:
		return nil, fmt.Errorf("cachefile: a disk tier of %d bytes", cfg.Capacity)
	case id.BlockSize <= 0 || id.Layers <= 0 || id.KVDim <= 0:
		return nil, fmt.Errorf("cachefile: a disk tier for blocks of %d tokens, %d layers × %d KV width", id.BlockSize, id.Layers, id.KVDim)
	}
	hdr, err := MarshalHeader(id, cfg.Seed, 1)
	if err != nil {
		return nil, err
	}
	t := &DiskTier{
		dir: filepath.Join(cfg.Dir, IdentityDir(id, cfg.Seed)), id: id, seed: cfg.Seed,
		hasher: kvevents.NewHasher(id.HashAlgo, cfg.Seed, id.LoRA), capacity: cfg.Capacity,
		maxQueue: cfg.QueueBlocks, maxQueueB: cfg.QueueBytes, flushWait: cfg.FlushWait,
		lead:        append(AppendLead(nil, len(hdr)), hdr...),
		beforeWrite: cfg.beforeWrite,
		lru:         list.New(), byHash: make(map[kvevents.Hash]*list.Element),
		pending: make(map[kvevents.Hash]*kvcache.TierBlock), touch: make(map[kvevents.Hash]bool),
		blocked: make(map[kvevents.Hash]bool),
		idle:    make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	close(t.idle)
	t.fileBytes = int64(len(t.lead) + id.RecordBytes() + sha256.Size)
	if t.maxQueue <= 0 {
		t.maxQueue = DefaultQueueBlocks
	}
	if t.maxQueueB <= 0 {
		t.maxQueueB = DefaultQueueBytes
	}
	if t.flushWait <= 0 {
		t.flushWait = DefaultFlushWait
	}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := RemoveStaleTemps(t.dir); err != nil {
		return nil, err
	}
	if err := t.index(); err != nil {
		return nil, err
	}
	go t.run()
	return t, nil
}

// Dir is the tier's own subdirectory.
func (t *DiskTier) Dir() string { return t.dir }

// FileBytes is the size of every block file of the tier.
func (t *DiskTier) FileBytes() int64 { return t.fileBytes }

// SetAside returns the paths of the files the tier has set aside so far.
func (t *DiskTier) SetAside() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.setAside)
}

func blockName(h kvevents.Hash) string { return hex.EncodeToString(h[:]) + BlockExt }

// parseBlockName returns the hash a block file's name names; a name that
// is not exactly what blockName writes is not a block's.
func parseBlockName(name string) (kvevents.Hash, bool) {
	var h kvevents.Hash
	stem, ok := strings.CutSuffix(name, BlockExt)
	if !ok || len(stem) != 2*len(h) {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(stem)); err != nil || blockName(h) != name {
		return h, false
	}
	return h, true
}

func (t *DiskTier) path(h kvevents.Hash) string { return filepath.Join(t.dir, blockName(h)) }

// index builds the LRU from the files in the tier's subdirectory.
func (t *DiskTier) index() error {
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return err
	}
	type found struct {
		h   kvevents.Hash
		mod time.Time
	}
	var files []found
	for _, e := range entries {
		h, ok := parseBlockName(e.Name())
		if !ok {
			continue // not a block's name: what was set aside, or another's
		}
		mod, err := t.checkHead(h)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case errors.Is(err, errNotRegular):
			t.blocked[h] = true
		case err != nil:
			t.refuseLocked(h)
		default:
			files = append(files, found{h, mod})
		}
	}
	slices.SortStableFunc(files, func(a, b found) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		t.byHash[f.h] = t.lru.PushFront(f.h)
		t.bytes += t.fileBytes
	}
	for _, h := range t.makeRoomLocked(0) {
		os.Remove(t.path(h))
	}
	return nil
}

// open opens block h's file for reading and checks that it is a regular
// file of the tier's size. What is not a regular file under the name — a
// directory, a FIFO, a symbolic link, which could lead to a file outside
// the tier's subdirectory — is never opened, and one swapped in between
// the check and the open is found by comparing the two (and, a FIFO,
// opened without waiting for a writer).
func (t *DiskTier) open(h kvevents.Hash) (*os.File, os.FileInfo, error) {
	path := t.path(h)
	lst, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	if !lst.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w (%s)", errNotRegular, lst.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case !os.SameFile(lst, st):
		err = fmt.Errorf("%w: replaced while it was opened", errNotRegular)
	case st.Size() != t.fileBytes:
		err = fmt.Errorf("%d bytes, where a block file of this tier has %d", st.Size(), t.fileBytes)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// checkHead checks block h's file as far as its record's tokens: its size,
// its lead and header (this tier's identity and seed, one block), its
// record's hash (the one its name says, and the hash of its tokens). It
// returns the file's modification time.
func (t *DiskTier) checkHead(h kvevents.Hash) (time.Time, error) {
	mod, _, _, err := t.head(h)
	return mod, err
}

// storedEvent is block h's BlockStored, from its file's record head.
func (t *DiskTier) storedEvent(h kvevents.Hash) (kvevents.Event, bool) {
	_, tokens, parent, err := t.head(h)
	if err != nil {
		return kvevents.Event{}, false
	}
	return kvcache.StoredEvent(&kvcache.TierBlock{Hash: h, Parent: parent, Tokens: tokens}, t.Name()), true
}

// head reads and checks block h's file's header and record head (checkHead)
// and returns the file's time, the block's tokens and its parent.
func (t *DiskTier) head(h kvevents.Hash) (time.Time, []int32, *kvevents.Hash, error) {
	f, st, err := t.open(h)
	if err != nil {
		return time.Time{}, nil, nil, err
	}
	defer f.Close()
	head := make([]byte, len(t.lead)+t.id.HeadBytes())
	if _, err := f.ReadAt(head, 0); err != nil {
		return time.Time{}, nil, nil, err
	}
	if !bytes.Equal(head[:len(t.lead)], t.lead) {
		return time.Time{}, nil, nil, errors.New("not a block file of this identity and seed")
	}
	rec := head[len(t.lead):]
	var hash, parent kvevents.Hash
	copy(hash[:], rec[:32])
	copy(parent[:], rec[33:65])
	tokens := make([]int32, t.id.BlockSize)
	for j := range tokens {
		tokens[j] = int32(binary.LittleEndian.Uint32(rec[65+4*j:]))
	}
	want := t.hasher.First(tokens, "")
	var p *kvevents.Hash
	if rec[32] == 1 {
		want, p = t.hasher.Next(parent, tokens), &parent
	}
	if hash != h || want != h {
		return time.Time{}, nil, nil, errors.New("its record is not the block its name says")
	}
	return st.ModTime(), tokens, p, nil
}

// read reads block h's file and checks all of it: Scan, then the record's
// hash against h. The header's seed needs no check of its own: Scan checks
// the record's hash under it, and a hash under another seed that equals h
// would be a collision of SHA-256.
func (t *DiskTier) read(h kvevents.Hash) (kvcache.TierBlock, error) {
	f, _, err := t.open(h)
	if err != nil {
		return kvcache.TierBlock{}, err
	}
	defer f.Close()
	raw := make([]byte, t.fileBytes)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, t.fileBytes), raw); err != nil {
		return kvcache.TierBlock{}, err
	}
	_, recs, err := Scan(bytes.NewReader(raw), t.fileBytes, t.id)
	switch {
	case err != nil:
	case len(recs) != 1:
		err = fmt.Errorf("%d records, a block file holds one", len(recs))
	case recs[0].Hash != h:
		err = fmt.Errorf("it holds block %s", recs[0].Hash)
	}
	if err != nil {
		return kvcache.TierBlock{}, err
	}
	r := recs[0]
	kv := raw[r.KVAt : r.KVAt+int64(t.id.KVBytes()) : r.KVAt+int64(t.id.KVBytes())]
	b := kvcache.TierBlock{Hash: r.Hash, Tokens: r.Tokens, KV: kv, Sum: kvcache.TierSum(kv)}
	if r.HasParent {
		p := r.Parent
		b.Parent = &p
	}
	return b, nil
}

// refuseLocked sets block h's file aside and counts it; a file it cannot
// rename is left where it is, and its name is never written.
func (t *DiskTier) refuseLocked(h kvevents.Hash) {
	t.stats.Corrupt++
	aside, err := SetAside(t.path(h), time.Now())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			t.blocked[h] = true
		}
		return
	}
	t.setAside = append(t.setAside, aside)
}

// Name is vLLM's name of a disk medium.
func (t *DiskTier) Name() string { return "DISK" }

// Put queues b for the writer and returns at once. A block the tier holds
// already is not written again (its hash names the same tokens after the
// same prefix, so the same KV): it only becomes the most recent.
func (t *DiskTier) Put(b kvcache.TierBlock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, queued := t.pending[b.Hash]
	switch e, held := t.byHash[b.Hash]; {
	case t.closing || b.Salted || t.blocked[b.Hash] || t.fileBytes > t.capacity ||
		len(b.Tokens) != t.id.BlockSize || len(b.KV) != t.id.KVBytes():
		t.stats.Dropped++
	case queued:
	case held:
		t.lru.MoveToFront(e)
		t.touch[b.Hash] = true
		t.stats.Puts++
		t.signal()
	case len(t.pending) >= t.maxQueue || t.pendingBytes()+t.fileBytes > t.maxQueueB:
		t.stats.Dropped++
	default:
		if len(t.pending) == 0 {
			t.idle = make(chan struct{})
		}
		t.pending[b.Hash] = &b
		t.queue = append(t.queue, b.Hash)
		t.emitLocked(kvcache.StoredEvent(&b, t.Name()))
		t.signal()
	}
}

// SetEventSink implements kvcache.TierEvents: a block is announced on DISK
// when Put queues it (Has finds it from then on) and removed when the tier
// lets it go (evicted, refused, or a write that failed).
func (t *DiskTier) SetEventSink(sink func(kvevents.Event)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sink = sink
}

// StoredEvents implements kvcache.TierEvents: a BlockStored per block held
// or queued. A stored block's tokens and parent are read from its file's
// record head (bounded work per file); a file that cannot be read is left
// out, as Get would refuse it.
func (t *DiskTier) StoredEvents() []kvevents.Event {
	t.mu.Lock()
	var out []kvevents.Event
	for _, b := range t.pending {
		out = append(out, kvcache.StoredEvent(b, t.Name()))
	}
	var held []kvevents.Hash
	for e := t.lru.Back(); e != nil; e = e.Prev() {
		held = append(held, e.Value.(kvevents.Hash))
	}
	t.mu.Unlock()
	for _, h := range held {
		if ev, ok := t.storedEvent(h); ok {
			out = append(out, ev)
		}
	}
	return out
}

// emitLocked hands ev to the sink, with t.mu held: the sink takes only
// the observer's own short lock, and never calls back.
func (t *DiskTier) emitLocked(ev kvevents.Event) {
	if t.sink != nil {
		t.sink(ev)
	}
}

func (t *DiskTier) pendingBytes() int64 { return int64(len(t.pending)) * t.fileBytes }

func (t *DiskTier) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Get returns block h: a queued block from memory, a stored one read from
// its file and checked whole. A file that fails is set aside.
func (t *DiskTier) Get(h kvevents.Hash) (kvcache.TierBlock, bool) {
	t.mu.Lock()
	if b, ok := t.pending[h]; ok {
		defer t.mu.Unlock()
		if !b.Intact() {
			return kvcache.TierBlock{}, false // the writer counts it and drops it
		}
		t.stats.Hits++
		return *b, true
	}
	e, ok := t.byHash[h]
	if !ok {
		t.mu.Unlock()
		return kvcache.TierBlock{}, false
	}
	t.lru.MoveToFront(e)
	t.mu.Unlock()

	b, err := t.read(h)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.byHash[h] == e {
			t.removeLocked(e)
		}
		switch {
		case errors.Is(err, os.ErrNotExist): // evicted meanwhile, or removed by hand
		case errors.Is(err, errNotRegular):
			t.blocked[h] = true
		default:
			t.refuseLocked(h)
		}
		return kvcache.TierBlock{}, false
	}
	t.stats.Hits++
	t.touch[h] = true
	t.signal()
	return b, true
}

// Has reports whether h is queued or stored, with no side effect.
func (t *DiskTier) Has(h kvevents.Hash) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, queued := t.pending[h]
	_, held := t.byHash[h]
	return queued || held
}

// Stats reports the tier's counters: Blocks counts queued blocks too.
func (t *DiskTier) Stats() kvcache.TierStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Name, s.Blocks, s.Bytes, s.Capacity = t.Name(), t.lru.Len()+len(t.pending), t.bytes, t.capacity
	return s
}

// AuditTier implements kvcache.TierAuditor from the tier's books alone
// (an engine audits after every step: reading the files would cost a
// disk's worth of reads): the index and the recency list hold the same
// blocks, their files' bytes (and a write's under way) are the bytes
// counted, within the budget; every queued block is pending, at most one
// pending block is not queued (the one being written), and no block is
// both pending and stored, nor stored under a name the tier does not
// write.
func (t *DiskTier) AuditTier() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lru.Len() != len(t.byHash) {
		return fmt.Errorf("%d blocks in the recency list, %d in the index", t.lru.Len(), len(t.byHash))
	}
	for e := t.lru.Front(); e != nil; e = e.Next() {
		h := e.Value.(kvevents.Hash)
		switch {
		case t.byHash[h] != e:
			return fmt.Errorf("block %s is not indexed where it is listed", h)
		case t.pending[h] != nil:
			return fmt.Errorf("block %s is both stored and pending", h)
		case t.blocked[h]:
			return fmt.Errorf("block %s is stored under a name the tier does not write", h)
		}
	}
	files := int64(t.lru.Len())
	if t.writing {
		files++
	}
	if files*t.fileBytes != t.bytes || t.bytes > t.capacity {
		return fmt.Errorf("%d files of %d bytes, %d counted, a budget of %d", files, t.fileBytes, t.bytes, t.capacity)
	}
	queued := 0
	for _, h := range t.queue {
		if t.pending[h] != nil {
			queued++
		}
	}
	if n := len(t.pending) - queued; n < 0 || n > 1 {
		return fmt.Errorf("%d blocks pending, %d of them queued", len(t.pending), queued)
	}
	return nil
}

func (t *DiskTier) removeLocked(e *list.Element) {
	h := t.lru.Remove(e).(kvevents.Hash)
	delete(t.byHash, h)
	t.bytes -= t.fileBytes
	t.emitLocked(kvcache.RemovedEvent(h, t.Name()))
}

// makeRoomLocked drops the least recent blocks from the index until n more
// bytes fit, and returns them: their files are removed with the lock
// released.
func (t *DiskTier) makeRoomLocked(n int64) []kvevents.Hash {
	var out []kvevents.Hash
	for t.bytes+n > t.capacity && t.lru.Len() > 0 {
		e := t.lru.Back()
		out = append(out, e.Value.(kvevents.Hash))
		t.removeLocked(e)
		t.stats.Evictions++
	}
	return out
}

// Flush waits until the blocks queued now are written, or wait has passed.
func (t *DiskTier) Flush(wait time.Duration) error {
	t.mu.Lock()
	idle, n := t.idle, len(t.pending)
	t.mu.Unlock()
	if n == 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-idle:
		return nil
	case <-timer.C:
		return fmt.Errorf("cachefile: %d blocks still queued for the disk after %v", n, wait)
	}
}

// Close stops taking blocks, waits up to FlushWait for the writer to write
// what is queued, and stops it. Blocks still queued then are dropped (and
// counted); a write under way finishes on its own.
func (t *DiskTier) Close() error {
	t.mu.Lock()
	t.closing = true
	t.signal()
	t.mu.Unlock()
	timer := time.NewTimer(t.flushWait)
	defer timer.Stop()
	select {
	case <-t.done:
		return nil
	case <-timer.C:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	n := len(t.queue)
	for _, h := range t.queue {
		delete(t.pending, h)
		t.emitLocked(kvcache.RemovedEvent(h, t.Name()))
	}
	t.queue = nil
	t.stats.Dropped += n
	t.idleIfEmptyLocked()
	return fmt.Errorf("cachefile: the disk tier's writer did not finish in %v: %d queued blocks dropped", t.flushWait, n)
}

func (t *DiskTier) idleIfEmptyLocked() {
	if len(t.pending) == 0 {
		select {
		case <-t.idle:
		default:
			close(t.idle)
		}
	}
}

// run is the writer: it takes the queue's blocks oldest first and records
// recent use in the files' modification times.
func (t *DiskTier) run() {
	defer close(t.done)
	for {
		t.mu.Lock()
		var touch map[kvevents.Hash]bool
		if len(t.touch) > 0 {
			touch, t.touch = t.touch, make(map[kvevents.Hash]bool)
		}
		var b *kvcache.TierBlock
		for len(t.queue) > 0 && b == nil && !t.stopped {
			b = t.pending[t.queue[0]] // nil for none: the queue names each pending block once
			t.queue = t.queue[1:]
		}
		exit := t.stopped || (t.closing && b == nil && len(touch) == 0)
		t.mu.Unlock()

		now := time.Now()
		for h := range touch {
			os.Chtimes(t.path(h), now, now) // best effort: it orders a restart's LRU
		}
		switch {
		case b != nil:
			t.store(b)
		case len(touch) > 0:
		case exit:
			return
		default:
			<-t.wake
		}
	}
}

// store writes b's file: room is made first, so the files never pass the
// budget.
func (t *DiskTier) store(b *kvcache.TierBlock) {
	if t.beforeWrite != nil {
		t.beforeWrite(b.Hash)
	}
	err := t.check(b)
	var victims []kvevents.Hash
	t.mu.Lock()
	if err == nil {
		victims = t.makeRoomLocked(t.fileBytes)
		t.bytes += t.fileBytes
		t.writing = true
	}
	t.mu.Unlock()
	for _, h := range victims {
		os.Remove(t.path(h))
	}
	if err == nil {
		err = t.writeFile(b)
		if err != nil {
			err = fmt.Errorf("%w: %w", errWrite, err)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	t.writing = false
	delete(t.pending, b.Hash)
	t.idleIfEmptyLocked()
	if err != nil { // announced at Put, never stored
		t.emitLocked(kvcache.RemovedEvent(b.Hash, t.Name()))
	}
	switch {
	case err == nil:
		t.byHash[b.Hash] = t.lru.PushFront(b.Hash)
		t.stats.Puts++
	case errors.Is(err, errCorrupt):
		t.stats.Corrupt++
	case errors.Is(err, errWrite):
		t.bytes -= t.fileBytes
		t.stats.Dropped++
		if errors.Is(err, errExists) {
			t.blocked[b.Hash] = true
		}
	default:
		t.stats.Dropped++
	}
}

var (
	errCorrupt = errors.New("its KV fails its checksum")
	errWrite   = errors.New("writing")
	errExists  = errors.New("a file the tier does not hold is in the way")
)

// check refuses a block whose KV changed since it was demoted, or whose
// hash is not the hash of its tokens: its file would be refused by every
// reader.
func (t *DiskTier) check(b *kvcache.TierBlock) error {
	if !b.Intact() {
		return errCorrupt
	}
	want := t.hasher.First(b.Tokens, "")
	if b.Parent != nil {
		want = t.hasher.Next(*b.Parent, b.Tokens)
	}
	if want != b.Hash {
		return errors.New("its hash is not the hash of its tokens")
	}
	return nil
}

// writeFile writes b's file under a temporary name, syncs it and renames it
// into place, unless something is there already: a name the tier does
// not hold is not its to overwrite.
func (t *DiskTier) writeFile(b *kvcache.TierBlock) (err error) {
	raw := make([]byte, 0, t.fileBytes)
	raw = append(raw, t.lead...)
	raw = AppendRecordHead(raw, b.Hash, b.Parent, b.Tokens)
	raw = append(raw, b.KV...)
	sum := sha256.Sum256(raw)
	raw = append(raw, sum[:]...)

	tmp, err := os.CreateTemp(t.dir, TempPattern)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(raw); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	// The file's time is its last use, which orders a restart's LRU: set
	// from the clock the Gets' touches use, not the file system's coarser
	// one, so a block written after a touch is never older than it.
	now := time.Now()
	if err = os.Chtimes(tmp.Name(), now, now); err != nil {
		return err
	}
	path := t.path(b.Hash)
	if _, err = os.Lstat(path); err == nil {
		return fmt.Errorf("%w: %s", errExists, path)
	}
	return os.Rename(tmp.Name(), path)
}
