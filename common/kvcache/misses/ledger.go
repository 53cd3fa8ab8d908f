package misses

// Reasons splits a request's computed prompt tokens by why the cache did
// not supply them; the counts sum to the prompt's length less its cached
// tokens. Tokens promoted from a host or disk tier are cached, not missed.
type Reasons struct {
	Cold      int // the block was never cached, under any salt
	Evicted   int // cached before under this salt, evicted since
	Salt      int // cached under another salt only
	Partial   int // the tail below a whole block, never cached
	Preempted int // computed before the sequence was preempted

	// EvictedAt is the engine step of the latest eviction among the
	// evicted blocks, and EvictedBy the request whose admission displaced
	// it (-1 if unknown); both meaningful only when Evicted > 0.
	EvictedAt int64
	EvictedBy int
}

// Total is the number of computed tokens the reasons cover.
func (r Reasons) Total() int { return r.Cold + r.Evicted + r.Salt + r.Partial + r.Preempted }

// Add accumulates o into r, for engine-wide totals.
func (r *Reasons) Add(o Reasons) {
	r.Cold += o.Cold
	r.Evicted += o.Evicted
	r.Salt += o.Salt
	r.Partial += o.Partial
	r.Preempted += o.Preempted
	if o.Evicted > 0 && o.EvictedAt >= r.EvictedAt {
		r.EvictedAt, r.EvictedBy = o.EvictedAt, o.EvictedBy
	}
}

// eviction is when a salted block last left the cache, and who pushed it.
type eviction struct {
	step int64
	by   int
}

// Ledger remembers which blocks were ever stored and which were evicted.
//
// Memory is bounded: at most Cap salted keys and Cap plain keys are
// remembered. At the cap a new block is not remembered, so a later miss on
// it counts as cold: the ledger undercounts evicted and salt, never invents
// them. Not safe for concurrent use; the engine drives it from its own
// goroutine.
type Ledger struct {
	blockSize int
	cap       int
	salted    map[uint64]*eviction // nil value: stored, never evicted
	plain     map[uint64]struct{}
}

// New returns a ledger for blocks of blockSize tokens remembering at most
// capKeys keys of each kind.
func New(blockSize, capKeys int) *Ledger {
	return &Ledger{blockSize: blockSize, cap: capKeys,
		salted: map[uint64]*eviction{}, plain: map[uint64]struct{}{}}
}

// Stored records that the cache now holds the blocks keys name: a block
// cached again is no longer evicted.
func (l *Ledger) Stored(keys []Key) {
	for _, k := range keys {
		if _, ok := l.salted[k.Salted]; ok || len(l.salted) < l.cap {
			l.salted[k.Salted] = nil
		}
		if _, ok := l.plain[k.Plain]; ok || len(l.plain) < l.cap {
			l.plain[k.Plain] = struct{}{}
		}
	}
}

// Removed records that the block with salted key left the cache at step,
// displaced by request by (-1 if unknown). A key never stored is ignored.
func (l *Ledger) Removed(salted uint64, step int64, by int) {
	if _, ok := l.salted[salted]; ok {
		l.salted[salted] = &eviction{step: step, by: by}
	}
}

// Admit attributes the computed tokens of a prompt at its admission: cached
// tokens were reused, and of the rest the first preempted ones were
// computed before a preemption. It is O(prompt blocks). It does not store
// the prompt's blocks; the caller does so once they are committed. A block
// stored under this salt and not reused counts as evicted even when no
// Removed reported it: the cache let it go (EvictedAt then stays unknown,
// 0 and -1), or rarely another sequence was computing it at the same time.
func (l *Ledger) Admit(prompt []int32, salt string, cached, preempted int) Reasons {
	return l.AdmitKeys(Keys(prompt, salt, l.blockSize), len(prompt), cached, preempted)
}

// AdmitKeys is Admit for a prompt of n tokens whose whole blocks' keys the
// caller already holds: the engine keeps them to store the same blocks at
// commit, so the prompt is hashed once.
func (l *Ledger) AdmitKeys(keys []Key, n, cached, preempted int) Reasons {
	r := Reasons{EvictedBy: -1}
	whole := len(keys) * l.blockSize
	for pos := cached; pos < n; {
		end := min(n, (pos/l.blockSize+1)*l.blockSize)
		m := end - pos
		if p := min(m, max(0, cached+preempted-pos)); p > 0 {
			r.Preempted += p
			pos += p
			continue
		}
		if pos >= whole {
			r.Partial += m
			pos = end
			continue
		}
		k := keys[pos/l.blockSize]
		ev, seen := l.salted[k.Salted]
		_, other := l.plain[k.Plain]
		switch {
		case seen:
			r.Evicted += m
			if ev != nil && ev.step >= r.EvictedAt {
				r.EvictedAt, r.EvictedBy = ev.step, ev.by
			}
		case !seen && other:
			r.Salt += m
		default:
			r.Cold += m
		}
		pos = end
	}
	return r
}

// Names are the reasons' names, as /metrics and the API's usage spell them.
var Names = []string{"cold", "evicted", "salt", "partial", "preempted"}

// Counts returns the reasons' counts in the order of Names.
func (r Reasons) Counts() [5]int { return [5]int{r.Cold, r.Evicted, r.Salt, r.Partial, r.Preempted} }

// ByName returns the non-zero reasons by name, nil when none: the API
// leaves the field out then.
func (r Reasons) ByName() map[string]int {
	var m map[string]int
	for i, v := range r.Counts() {
		if v != 0 {
			if m == nil {
				m = map[string]int{}
			}
			m[Names[i]] = v
		}
	}
	return m
}
