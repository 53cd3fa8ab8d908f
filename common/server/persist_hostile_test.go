package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvevents"
)

// wrappingCountFile is a cache file for id that passes its checksum and
// its identity but announces a block count whose product with the record
// size (rec bytes) wraps around to the bytes that follow the header: a
// reader that checks count × size against the length, and believes the
// count, allocates an impossible number of blocks.
func wrappingCountFile(t testing.TB, id CacheIdentity, seed string, rec int64) []byte {
	t.Helper()
	// rec = 2^k × odd: the count is body/2^k × odd⁻¹ mod 2^(64-k).
	k := 0
	for rec>>k&1 == 0 {
		k++
	}
	odd := big.NewInt(rec >> k)
	mod := new(big.Int).Lsh(big.NewInt(1), uint(64-k))
	inv := new(big.Int).ModInverse(odd, mod)
	require.NotNil(t, inv)
	for body := int64(1) << k; body < 1<<20; body += 1 << k {
		n := new(big.Int).Mul(big.NewInt(body>>k), inv)
		n.Mod(n, mod)
		if !n.IsInt64() || n.Int64() <= body || n.Int64()*rec != body { // the last: wraps as the reader's arithmetic does
			continue
		}
		hdr, err := json.Marshal(cachefile.Header{Identity: id, Seed: seed, Blocks: int(n.Int64())})
		require.NoError(t, err)
		f := append([]byte(cachefile.Magic), binary.LittleEndian.AppendUint32(nil, uint32(len(hdr)))...)
		f = append(f, hdr...)
		f = append(f, make([]byte, body)...)
		sum := sha256.Sum256(f)
		return append(f, sum[:]...)
	}
	t.Fatal("no body length gives a wrapping count")
	return nil
}

// slotServerWith is slotServer with a byte budget for the slot directory;
// it returns the slot files' CacheFile too.
func slotServerWith(t *testing.T, tm testModel, dir string, budget int64) (*testServer, *CacheFile) {
	t.Helper()
	var kv *CacheFile
	ts := startServerFor(t, tm, engineConfig(true), engine.Limits{}, func(e *engine.Engine) Options {
		p := e.Pool()
		kv = &CacheFile{
			Identity: CacheIdentity{Model: "test-model", BlockSize: p.BlockSize(), Layers: p.Layers(), KVDim: p.KVDim(), DType: "float32"},
			Pool:     p, Observer: p.Observe(kvevents.DefaultHashSeed), Seed: kvevents.DefaultHashSeed,
			SlotDirMaxBytes: budget,
		}
		return Options{PrefixCaching: true, Slots: 1, SlotSavePath: dir, SlotKV: kv}
	}, nil)
	return ts, kv
}

// TestCacheFileRefusesACountThatWrapsAround: a file whose block count
// overflows the size check is refused with the count named, in every
// design, and nothing is allocated for the count (the restore used to
// panic in makeslice).
func TestCacheFileRefusesACountThatWrapsAround(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			cfg := engineConfig(true)
			cfg.PrefixCache = d.new
			e, file := observed(t, tm, cfg, path, "model-a")
			raw := wrappingCountFile(t, file.Identity, file.Seed, int64(file.blockBytes()))
			require.NoError(t, os.WriteFile(path, raw, 0o644))
			n, err := file.Restore()
			require.ErrorContains(t, err, "the header announces")
			assert.ErrorContains(t, err, "refusing "+path)
			assert.Zero(t, n)
			assert.Zero(t, e.Pool().UsedBlocks())
		})
	}
}

// TestSlotRestoreOfACraftedFileIsA400: the wrapping-count file restored
// through POST /slots/0?action=restore is a 400 that says why, and the
// server goes on serving.
func TestSlotRestoreOfACraftedFileIsA400(t *testing.T) {
	tm := loadTestModel(t)
	dir := t.TempDir()
	ts, kv := slotServerWith(t, tm, dir, 0)
	raw := wrappingCountFile(t, kv.Identity, kv.Seed, int64(kv.blockBytes()))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crafted.bin"), raw, 0o644))

	status, body := post(t, ts.url+"/slots/0?action=restore", map[string]any{"filename": "crafted.bin"})
	assert.Equal(t, http.StatusBadRequest, status, string(body))
	assert.Contains(t, string(body), "the header announces")
	r := complete(t, ts.url, map[string]any{"prompt": prompt(9, 1), "n_predict": 2, "ignore_eos": true})
	assert.Len(t, r.Tokens, 2, "the server still serves")
}

// TestSlotRestoreTakesTheFilesSalt: a slot whose last request ran under a
// cache_salt, then restored from a file (whose blocks are unsalted), holds
// the file's prompt unsalted: saving it again succeeds and writes the
// same blocks, and /slots shows no salt. Keeping the old salt would refuse
// the save, which breaks a router's warm-up chain.
func TestSlotRestoreTakesTheFilesSalt(t *testing.T) {
	tm := loadTestModel(t)
	ts, _ := slotServerWith(t, tm, t.TempDir(), 0)
	p := prompt(18, 6)
	complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 1, "ignore_eos": true, "id_slot": 0})
	save := func(name string) (int, map[string]any) {
		status, raw := post(t, ts.url+"/slots/0?action=save", map[string]any{"filename": name})
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		return status, out
	}
	status, first := save("p.bin")
	require.Equal(t, http.StatusOK, status, first)

	complete(t, ts.url, map[string]any{"prompt": prompt(9, 7), "n_predict": 1, "ignore_eos": true, "id_slot": 0, "cache_salt": "tenant-a"})
	status, out := save("salted.bin")
	require.Equal(t, http.StatusBadRequest, status, "a salted prompt is never saved: %v", out)

	status, raw := post(t, ts.url+"/slots/0?action=restore", map[string]any{"filename": "p.bin"})
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Empty(t, slotsOf(t, ts.url)[0].Params.CacheSalt, "the restored prompt carries the file's salt: none")
	status, again := save("again.bin")
	require.Equal(t, http.StatusOK, status, "the restored, unsalted prompt saves again: %v", again)
	assert.Equal(t, first["n_saved"], again["n_saved"])
	assert.Equal(t, first["n_written"], again["n_written"])
}

// TestSlotSaveKeepsToItsBudget: with a budget of one file and a half, a
// second file is refused with 507 naming the flag and leaves nothing
// behind (no file, no temporary), while saving over the first file's name
// is within the budget.
func TestSlotSaveKeepsToItsBudget(t *testing.T) {
	tm := loadTestModel(t)
	dir := t.TempDir()
	probe, _ := slotServerWith(t, tm, dir, 0)
	p := prompt(18, 8)
	complete(t, probe.url, map[string]any{"prompt": p, "n_predict": 1, "ignore_eos": true, "id_slot": 0})
	status, raw := post(t, probe.url+"/slots/0?action=save", map[string]any{"filename": "size.bin"})
	require.Equal(t, http.StatusOK, status, string(raw))
	st, err := os.Stat(filepath.Join(dir, "size.bin"))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "size.bin")))

	ts, _ := slotServerWith(t, tm, dir, st.Size()*3/2)
	complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 1, "ignore_eos": true, "id_slot": 0})
	status, raw = post(t, ts.url+"/slots/0?action=save", map[string]any{"filename": "a.bin"})
	require.Equal(t, http.StatusOK, status, string(raw))
	status, raw = post(t, ts.url+"/slots/0?action=save", map[string]any{"filename": "a.bin"})
	require.Equal(t, http.StatusOK, status, "the same name replaces its file: %s", raw)
	status, raw = post(t, ts.url+"/slots/0?action=save", map[string]any{"filename": "b.bin"})
	assert.Equal(t, http.StatusInsufficientStorage, status, string(raw))
	assert.Contains(t, string(raw), "--slot-save-max-bytes")
	assert.Contains(t, string(raw), "slot_save_max_bytes")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only a.bin: no b.bin, no temporary file")
	assert.Equal(t, "a.bin", entries[0].Name())
}

// TestSlotFileOperationsWaitTheirTurn: while another slot file operation
// runs (the gate held), a restore waits — its client gives up before any
// answer — and once the gate is free the same restore succeeds.
func TestSlotFileOperationsWaitTheirTurn(t *testing.T) {
	tm := loadTestModel(t)
	ts, kv := slotServerWith(t, tm, t.TempDir(), 0)
	client := &http.Client{Timeout: 10 * time.Second} // a hang fails, not stalls, the test
	restore := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/slots/0?action=restore", strings.NewReader(`{"filename": "p.bin"}`))
		require.NoError(t, err)
		return client.Do(req)
	}
	complete(t, ts.url, map[string]any{"prompt": prompt(18, 9), "n_predict": 1, "ignore_eos": true, "id_slot": 0})
	resp, err := client.Post(ts.url+"/slots/0?action=save", "application/json", strings.NewReader(`{"filename": "p.bin"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	kv.gateOnce.Do(func() { kv.gate = make(chan struct{}, 1) })
	select {
	case kv.gate <- struct{}{}: // another operation is running
	default:
		t.Fatal("the save that ended still holds the gate")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err = restore(ctx)
	if err == nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "the restore waits for the running operation")
	select {
	case <-kv.gate: // the running operation ends
	default:
		t.Fatal("the restore took the running operation's turn")
	}

	resp, err = restore(context.Background())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
