package server

import (
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// saveSlot writes the cached blocks of slot id's last prompt to name in
// --slot-save-path: the chain of full blocks the prefix cache still holds,
// from the first block on, in CacheFile's format. n_saved is the tokens
// written, a whole number of blocks (a partial last block is never cached).
func (h *Handler) saveSlot(w http.ResponseWriter, id int, name string) {
	c := h.opts.SlotKV
	if c == nil {
		writeError(w, errNotSupported("slot save and restore need --prefix-caching: without a prefix cache a request's KV is freed when it ends, and there is nothing to save"))
		return
	}
	prompt, salt := h.slots.lastPrompt(id)
	if salt != "" {
		writeError(w, errBadRequest("id_slot", "slot %d's last prompt ran under a cache_salt: salted KV is never written to a file, where the salt would be lost", id))
		return
	}
	chain := map[kvevents.Hash]bool{}
	for _, hash := range c.Observer.Hasher().BlockHashes(prompt, c.Identity.BlockSize, "") {
		chain[hash] = true
	}
	start := time.Now()
	blocks, size, err := c.saveTo(filepath.Join(h.opts.SlotSavePath, name), func(b kvcache.CachedBlock) bool { return !b.Salted && chain[b.Hash] })
	if err != nil {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "save_failed", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id_slot": id, "filename": name, "n_saved": blocks * c.Identity.BlockSize, "n_written": size,
		"timings": map[string]float64{"save_ms": ms(time.Since(start))},
	})
}

// restoreSlot commits the blocks of file name back into the prefix cache,
// on the engine's goroutine between two steps, and makes the longest
// chain the file holds the slot's last prompt, so a request for that
// prefix is placed in this slot. n_restored counts that chain's tokens,
// whether their blocks came from the file or were still cached.
func (h *Handler) restoreSlot(w http.ResponseWriter, id int, name string) {
	c := h.opts.SlotKV
	if c == nil {
		writeError(w, errNotSupported("slot save and restore need --prefix-caching: without a prefix cache a request's KV is freed when it ends, and there is nothing to save"))
		return
	}
	start := time.Now()
	blocks, size, err := c.load(filepath.Join(h.opts.SlotSavePath, name))
	if errors.Is(err, ErrNoCacheFile) {
		writeError(w, errBadRequest("filename", "Unable to restore slot: no file %q in --slot-save-path", name))
		return
	}
	if err != nil {
		writeError(w, errBadRequest("filename", "Unable to restore slot: %v", err))
		return
	}
	var prompt []int32
	err = h.es.Do(func(*engine.Engine) error {
		var err error
		_, prompt, err = c.commit(blocks)
		return err
	})
	if errors.Is(err, engine.ErrStopped) {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"})
		return
	}
	if err != nil && len(prompt) == 0 {
		writeError(w, errBadRequest("filename", "Unable to restore slot: %v", err))
		return
	}
	h.slots.setPrompt(id, prompt)
	writeJSON(w, http.StatusOK, map[string]any{
		"id_slot": id, "filename": name, "n_restored": len(prompt), "n_read": size,
		"timings": map[string]float64{"restore_ms": ms(time.Since(start))},
	})
}
