// Package kveventstest reads the vectors the block-hash tests share:
// common/kvevents/testdata/block_hashes.json, written by
// scripts/vllm_block_hashes.py from vLLM's definition of the block hash.
package kveventstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Golden is the vector file: vLLM's root hash per seed, and the block
// hashes of a few prompts.
type Golden struct {
	// CBOR2Checked counts the encodings the script checked against
	// cbor2's canonical encoding.
	CBOR2Checked int               `json:"cbor2_checked"`
	Roots        map[string]string `json:"roots"`
	Cases        []Case            `json:"cases"`
}

// Case is one prompt and the hashes of its whole blocks.
type Case struct {
	Name      string   `json:"name"`
	Seed      string   `json:"seed"`
	BlockSize int      `json:"block_size"`
	Salt      string   `json:"salt"`
	Tokens    []int64  `json:"tokens"`
	Hashes    []string `json:"hashes"`
}

// Load reads the vectors, failing t if they are missing or empty. The file
// is found beside this package's source, so any package's test can load
// it whatever its working directory.
func Load(t testing.TB) Golden {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("kveventstest: cannot locate the vector file")
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "testdata", "block_hashes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g Golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatal("kveventstest: no cases in the vector file")
	}
	return g
}
