package misses

// Key names one whole block by its chain: the salted half separates
// tenants, the plain half ignores the salt.
type Key struct {
	Salted uint64
	Plain  uint64
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix folds v into h, FNV-1a over its eight bytes: cheap, and the ledger
// needs no cryptographic strength, only few collisions.
func mix(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= fnvPrime
		v >>= 8
	}
	return h
}

// Keys returns the chained keys of tokens' whole blocks, the tail below a
// block dropped, since only whole blocks are cached. Each key hashes its
// parent's, so a block is named by its whole prefix, as the cache names it.
func Keys(tokens []int32, salt string, blockSize int) []Key {
	n := len(tokens) / blockSize
	keys := make([]Key, n)
	s := uint64(fnvOffset)
	for i := 0; i < len(salt); i++ {
		s = mix(s, uint64(salt[i]))
	}
	salted, plain := s, uint64(fnvOffset)
	for b := 0; b < n; b++ {
		for _, t := range tokens[b*blockSize : (b+1)*blockSize] {
			salted = mix(salted, uint64(uint32(t)))
			plain = mix(plain, uint64(uint32(t)))
		}
		keys[b] = Key{Salted: salted, Plain: plain}
	}
	return keys
}
