package kvevents

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents/kveventstest"
)

// TestBlockHashesMatchVLLM checks every hash byte for byte against the
// vectors: block sizes 4 and 16, whole blocks only, a partial last block
// (no hash), a prompt shorter than a block (none at all), no salt, an ASCII
// and a non-ASCII cache_salt, token ids at every CBOR width boundary, and
// another seed.
func TestBlockHashesMatchVLLM(t *testing.T) {
	g := kveventstest.Load(t)
	for seed, want := range g.Roots {
		assert.Equal(t, want, RootHash(seed).String(), "NONE_HASH for PYTHONHASHSEED=%q", seed)
	}
	sizes := map[int]bool{}
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			sizes[c.BlockSize] = true
			toks := make([]int32, len(c.Tokens))
			for i, v := range c.Tokens {
				toks[i] = int32(v)
			}
			require.Len(t, c.Hashes, len(toks)/c.BlockSize, "the vectors hash full blocks only")
			got := ChainHashes(RootHash(c.Seed), toks, c.BlockSize, c.Salt)
			if c.Seed == DefaultHashSeed {
				assert.Equal(t, got, BlockHashes(toks, c.BlockSize, c.Salt))
			}
			gotHex := make([]string, len(got))
			for i, h := range got {
				gotHex[i] = h.String()
			}
			if diff := cmp.Diff(c.Hashes, gotHex); diff != "" {
				t.Errorf("hashes differ from vLLM's (-vLLM +ours):\n%s", diff)
			}
		})
	}
	assert.True(t, sizes[4] && sizes[16], "vectors for block sizes 4 and 16")
}

// TestSaltOnlyChangesTheChainThroughBlockZero: vLLM salts the first block
// only, so two salts give different hashes everywhere, and a salted chain
// continues exactly as HashBlock with no salt from its first block.
func TestSaltOnlyChangesTheChainThroughBlockZero(t *testing.T) {
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	a, b := BlockHashes(toks, 4, "a"), BlockHashes(toks, 4, "b")
	assert.NotEqual(t, a[0], b[0])
	assert.NotEqual(t, a[1], b[1])
	assert.Equal(t, a[1], HashBlock(a[0], toks[4:], ""))
}

func TestHashJSONAndUint64(t *testing.T) {
	h := BlockHashes([]int32{1, 2, 3, 4}, 4, "")[0]
	b, err := json.Marshal(h)
	require.NoError(t, err)
	assert.Equal(t, `"`+h.String()+`"`, string(b))
	var back Hash
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, h, back)
	p, err := ParseHash(h.String())
	require.NoError(t, err)
	assert.Equal(t, h, p)
	assert.Error(t, json.Unmarshal([]byte(`"abc"`), &back))
	assert.Error(t, json.Unmarshal([]byte(`12`), &back))

	// vLLM's integer form: int.from_bytes(hash, "big") & (2**64 - 1).
	var x Hash
	x[24], x[31] = 0x80, 0x01
	assert.Equal(t, uint64(0x8000000000000001), x.Uint64())
}

// algoVectors is testdata/block_hashes_algos.json, written by
// scripts/vllm_block_hashes.py --all-algos from vLLM's definitions.
type algoVectors struct {
	VLLMCommit   string                       `json:"vllm_commit"`
	CBOR2Checked int                          `json:"cbor2_checked"`
	UnsetSeed    string                       `json:"unset_seed"`
	Roots        map[string]map[string]string `json:"roots"`
	Chains       []struct {
		Name      string     `json:"name"`
		Algo      string     `json:"algo"`
		Seed      string     `json:"seed"`
		BlockSize int        `json:"block_size"`
		LoRA      string     `json:"lora"`
		Salt      string     `json:"salt"`
		Tokens    []int64    `json:"tokens"`
		ExtraKeys [][]string `json:"extra_keys"`
		Hashes    []string   `json:"hashes"`
	} `json:"chains"`
	Pickles []struct {
		Name         string     `json:"name"`
		Str          *textSpec  `json:"str"`
		Parent       string     `json:"parent"`
		Tokens       []int64    `json:"tokens"`
		TokenRuns    [][2]int64 `json:"token_runs"`
		Extra        []textSpec `json:"extra"`
		Pickle       string     `json:"pickle"`
		PickleLen    int        `json:"pickle_len"`
		PickleSHA256 string     `json:"pickle_sha256"`
	} `json:"pickles"`
}

// textSpec is a string of the vector file: itself, or a run of one
// character written as {"repeat": c, "times": n}.
type textSpec string

func (t *textSpec) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = textSpec(s)
		return nil
	}
	var run struct {
		Repeat string `json:"repeat"`
		Times  int    `json:"times"`
	}
	if err := json.Unmarshal(b, &run); err != nil {
		return err
	}
	*t = textSpec(strings.Repeat(run.Repeat, run.Times))
	return nil
}

func loadAlgoVectors(t *testing.T) algoVectors {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "block_hashes_algos.json"))
	require.NoError(t, err)
	var v algoVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Chains)
	require.NotEmpty(t, v.Pickles)
	require.NotEmpty(t, v.VLLMCommit, "the vectors name the vLLM commit they follow")
	return v
}

func TestHashAlgoNames(t *testing.T) {
	want := map[HashAlgo]struct {
		name string
		size int
	}{SHA256: {"sha256", 32}, SHA256CBOR: {"sha256_cbor", 32}, XXHash: {"xxhash", 16}, XXHashCBOR: {"xxhash_cbor", 16}}
	require.Len(t, HashAlgos(), len(want))
	for _, a := range HashAlgos() {
		w := want[a]
		assert.Equal(t, w.name, a.String())
		assert.Equal(t, w.size, a.Size(), "%v", a)
		p, err := ParseHashAlgo(w.name)
		require.NoError(t, err)
		assert.Equal(t, a, p)
		txt, err := a.MarshalText()
		require.NoError(t, err)
		var back HashAlgo
		require.NoError(t, back.UnmarshalText(txt))
		assert.Equal(t, a, back)
	}
	var zero HashAlgo
	assert.Equal(t, SHA256CBOR, zero, "the zero value is the package's default")
	for _, bad := range []string{"", "SHA256", "sha-256", "builtin", "xxhash128"} {
		_, err := ParseHashAlgo(bad)
		assert.Error(t, err, "%q", bad)
	}
	_, err := HashAlgo(9).MarshalText()
	assert.Error(t, err)
}

// TestRootsMatchVLLM: NONE_HASH of each algorithm for seeds "0", "42", ""
// and vLLM's seed when PYTHONHASHSEED is unset.
func TestRootsMatchVLLM(t *testing.T) {
	v := loadAlgoVectors(t)
	require.Len(t, v.Roots, len(HashAlgos()))
	for name, seeds := range v.Roots {
		a, err := ParseHashAlgo(name)
		require.NoError(t, err)
		for seed, want := range seeds {
			r := a.Root(seed)
			assert.Equal(t, want, hex.EncodeToString(r.Bytes(a)), "%s root of PYTHONHASHSEED=%q", a, seed)
			assert.Equal(t, make([]byte, 32-a.Size()), r[:32-a.Size()], "a 16-byte digest sits behind zero bytes")
		}
		assert.Contains(t, seeds, UnsetHashSeed)
	}
	assert.Equal(t, UnsetHashSeed, v.UnsetSeed)
}

// TestChainsMatchVLLM checks every algorithm's chains byte for byte: both
// seeds, block sizes 4 and 16, a LoRA name, a salt, both, negative ids,
// ids beyond int32, a one-character LoRA name equal to the salt, and vLLM's
// seed for an unset PYTHONHASHSEED.
func TestChainsMatchVLLM(t *testing.T) {
	v := loadAlgoVectors(t)
	assert.Positive(t, v.CBOR2Checked, "the CBOR vectors were checked against cbor2")
	seen := map[HashAlgo]map[string]bool{}
	for _, c := range v.Chains {
		t.Run(c.Name, func(t *testing.T) {
			a, err := ParseHashAlgo(c.Algo)
			require.NoError(t, err)
			if seen[a] == nil {
				seen[a] = map[string]bool{}
			}
			h := NewHasher(a, c.Seed, c.LoRA)
			require.Len(t, c.Hashes, len(c.Tokens)/c.BlockSize)
			require.Len(t, c.ExtraKeys, len(c.Hashes))
			var got []string
			parent := h.Root().Bytes(a)
			narrow := true
			for i := range c.Hashes {
				keys := h.ExtraKeys(i == 0, c.Salt)
				assert.Equal(t, c.ExtraKeys[i], keys, "block %d's extra keys", i)
				block := c.Tokens[i*c.BlockSize : (i+1)*c.BlockSize]
				hash := blockHash(a, parent, block, keys)
				got = append(got, hex.EncodeToString(hash.Bytes(a)))
				parent = hash.Bytes(a)
				for _, x := range block {
					narrow = narrow && x == int64(int32(x))
				}
			}
			if diff := cmp.Diff(c.Hashes, got); diff != "" {
				t.Fatalf("hashes differ from vLLM's (-vLLM +ours):\n%s", diff)
			}
			if !narrow {
				seen[a]["wide"] = true
				return
			}
			// The int32 API agrees with the generic one.
			toks := make([]int32, len(c.Tokens))
			for i, x := range c.Tokens {
				toks[i] = int32(x)
			}
			var api []string
			for _, hash := range h.BlockHashes(toks, c.BlockSize, c.Salt) {
				api = append(api, hex.EncodeToString(hash.Bytes(a)))
			}
			assert.Equal(t, c.Hashes, api)
			seen[a]["seed="+c.Seed] = true
			if c.LoRA != "" && c.Salt != "" {
				seen[a]["lora+salt"] = true
			}
		})
	}
	for _, a := range HashAlgos() {
		for _, k := range []string{"seed=0", "seed=42", "seed=" + UnsetHashSeed, "lora+salt", "wide"} {
			assert.True(t, seen[a][k], "%s vectors cover %s", a, k)
		}
	}
}

// TestPickleMatchesCPython compares the pickle encoder with the bytes
// CPython's pickle.dumps(..., protocol=5) wrote: every int width, tuple
// sizes 0 to 4, short and long strings and bytes, strings CPython shares,
// frames split inside the tokens, before the extra keys and before a salt,
// payloads of 64 KiB and more outside frames, and root strings.
func TestPickleMatchesCPython(t *testing.T) {
	v := loadAlgoVectors(t)
	for _, c := range v.Pickles {
		t.Run(c.Name, func(t *testing.T) {
			var got []byte
			if c.Str != nil {
				got = pickleString(string(*c.Str))
			} else {
				parent, err := hex.DecodeString(c.Parent)
				require.NoError(t, err)
				toks := c.Tokens
				for _, r := range c.TokenRuns {
					for range r[1] {
						toks = append(toks, r[0])
					}
				}
				var extra []string
				for _, s := range c.Extra {
					extra = append(extra, string(s))
				}
				got = pickleBlock(parent, toks, extra)
			}
			if c.Pickle != "" {
				assert.Equal(t, c.Pickle, hex.EncodeToString(got))
				return
			}
			require.Equal(t, c.PickleLen, len(got), "pickle length")
			sum := sha256.Sum256(got)
			assert.Equal(t, c.PickleSHA256, hex.EncodeToString(sum[:]), "pickle bytes")
		})
	}
}

func TestZeroHasherIsTheDefault(t *testing.T) {
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	var zero Hasher
	def := NewHasher(SHA256CBOR, DefaultHashSeed, "")
	assert.Equal(t, BlockHashes(toks, 4, "s"), zero.BlockHashes(toks, 4, "s"))
	assert.Equal(t, def.BlockHashes(toks, 4, "s"), zero.BlockHashes(toks, 4, "s"))
	assert.Equal(t, RootHash(DefaultHashSeed), zero.Root())
	assert.Equal(t, SHA256CBOR, zero.Algo())
	assert.Equal(t, DefaultHashSeed, zero.Seed())
	assert.Equal(t, HashBlock(zero.Root(), toks[:4], "s"), zero.First(toks[:4], "s"))
}

// TestUnseededHasher: without PYTHONHASHSEED, sha256 and sha256_cbor share
// vLLM's fixed seed; the xxhash pair draw a random one per process.
func TestUnseededHasher(t *testing.T) {
	toks := []int32{1, 2, 3, 4}
	for _, a := range []HashAlgo{SHA256, SHA256CBOR} {
		u := NewUnseededHasher(a, "")
		assert.Equal(t, UnsetHashSeed, u.Seed())
		assert.Equal(t, a.Root(UnsetHashSeed), u.Root())
		assert.Equal(t, u.BlockHashes(toks, 4, ""), NewUnseededHasher(a, "").BlockHashes(toks, 4, ""))
	}
	for _, a := range []HashAlgo{XXHash, XXHashCBOR} {
		u1, u2 := NewUnseededHasher(a, "x"), NewUnseededHasher(a, "x")
		assert.Len(t, u1.Seed(), 64, "32 random bytes in hex")
		assert.NotEqual(t, u1.Seed(), u2.Seed())
		assert.NotEqual(t, u1.Root(), u2.Root())
		assert.Equal(t, a.Root(u1.Seed()), u1.Root())
		assert.NotEqual(t, u1.First(toks, ""), u2.First(toks, ""))
		assert.Equal(t, "x", u1.LoRA())
	}
}

// TestLoRAEntersEveryBlock: vLLM puts the LoRA name in every block's extra
// keys, so a LoRA chain differs from the plain one at every block, even
// from the same parent; the salt enters the first block only.
func TestLoRAEntersEveryBlock(t *testing.T) {
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	for _, a := range HashAlgos() {
		plain, lora := NewHasher(a, "0", ""), NewHasher(a, "0", "adapter")
		p, l := plain.BlockHashes(toks, 4, ""), lora.BlockHashes(toks, 4, "")
		assert.NotEqual(t, p[0], l[0], "%s", a)
		assert.NotEqual(t, plain.Next(p[0], toks[4:]), lora.Next(p[0], toks[4:]), "%s", a)
		assert.Equal(t, l[1], lora.Next(l[0], toks[4:]), "%s", a)
		salted := lora.BlockHashes(toks, 4, "s")
		assert.NotEqual(t, l[0], salted[0])
		assert.Equal(t, salted[1], lora.Next(salted[0], toks[4:]), "the salt does not enter block 1")
		assert.Equal(t, []string{"adapter", "s"}, lora.ExtraKeys(true, "s"), "LoRA name first, then the salt")
		assert.Nil(t, plain.ExtraKeys(false, "s"))
	}
}
