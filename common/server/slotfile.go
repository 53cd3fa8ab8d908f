package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
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
func (h *Handler) saveSlot(w http.ResponseWriter, r *http.Request, id int, name string) {
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
	if !h.enterSlotIO(w, r, c) {
		return
	}
	defer c.leaveSlotIO()
	start := time.Now()
	limit, used, err := slotBudget(h.opts.SlotSavePath, name, c.SlotDirMaxBytes)
	if err == nil && c.SlotDirMaxBytes > 0 && limit <= 0 {
		err = fmt.Errorf("%w: the other files take %d bytes", errOverBudget, used)
	}
	blocks, size := 0, 0
	if err == nil {
		blocks, size, err = c.saveTo(filepath.Join(h.opts.SlotSavePath, name), func(b kvcache.CachedBlock) bool { return !b.Salted && chain[b.Hash] }, limit)
	}
	if errors.Is(err, errOverBudget) {
		writeError(w, &apiError{Status: http.StatusInsufficientStorage, Type: "server_error", Code: "slot_save_max_bytes", Param: "filename",
			Message: fmt.Sprintf("Unable to save slot: the files of --slot-save-path would pass --slot-save-max-bytes %d (%d bytes in other files): %v", c.SlotDirMaxBytes, used, err)})
		return
	}
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
func (h *Handler) restoreSlot(w http.ResponseWriter, r *http.Request, id int, name string) {
	c := h.opts.SlotKV
	if c == nil {
		writeError(w, errNotSupported("slot save and restore need --prefix-caching: without a prefix cache a request's KV is freed when it ends, and there is nothing to save"))
		return
	}
	if !h.enterSlotIO(w, r, c) {
		return
	}
	defer c.leaveSlotIO()
	start := time.Now()
	saved, err := c.load(filepath.Join(h.opts.SlotSavePath, name))
	if errors.Is(err, ErrNoCacheFile) {
		writeError(w, errBadRequest("filename", "Unable to restore slot: no file %q in --slot-save-path", name))
		return
	}
	if err != nil {
		writeError(w, errBadRequest("filename", "Unable to restore slot: %v", err))
		return
	}
	defer saved.Close()
	var prompt []int32
	err = h.es.Do(func(*engine.Engine) error {
		var err error
		_, prompt, err = c.commit(saved)
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
		"id_slot": id, "filename": name, "n_restored": len(prompt), "n_read": saved.size,
		"timings": map[string]float64{"restore_ms": ms(time.Since(start))},
	})
}

// enterSlotIO waits for c's slot file operations to be free, so one slot
// save or restore runs at a time and concurrent ones wait their turn
// instead of each holding a file's worth of work at once. It returns
// false, having answered, when the client leaves first.
func (h *Handler) enterSlotIO(w http.ResponseWriter, r *http.Request, c *CacheFile) bool {
	c.gateOnce.Do(func() { c.gate = make(chan struct{}, 1) })
	select {
	case c.gate <- struct{}{}:
		return true
	case <-r.Context().Done():
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "slot_busy", Message: "the request ended while waiting for another slot save or restore"})
		return false
	}
}

func (c *CacheFile) leaveSlotIO() { <-c.gate }

// slotBudget returns how many bytes a slot save of name in dir may write
// under max (0: no limit): max less the bytes of the other files there;
// the file of that name is left out, since the save replaces it. used is
// those other files' bytes.
func slotBudget(dir, name string, max int64) (limit, used int64, err error) {
	if max <= 0 {
		return 0, 0, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		if e.Name() == name || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		used += info.Size()
	}
	return max - used, used, nil
}
