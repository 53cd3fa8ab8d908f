package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSlotsSaveAndRestoreAcrossServers: serve's -parallel and
// -slot-save-path reach the handler, and a slot saved by one server warms
// another started on the same model.
func TestServeSlotsSaveAndRestoreAcrossServers(t *testing.T) {
	dir := smallModel(t, "llama")
	slots := t.TempDir()
	body := `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "n_predict": 2, "temperature": 0, "ignore_eos": true, "id_slot": 1}`
	postJSON := func(url, body string) map[string]any {
		t.Helper()
		resp, err := testClient.Post(url, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
		return out
	}

	args := []string{"-model", dir, "-block-size", "4", "-prefix-caching", "-parallel", "2", "-slot-save-path", slots}
	src, stopSrc, srcDone, _ := startServe(t, cachedVariant, args...)
	resp, err := testClient.Get(src + "/props")
	require.NoError(t, err)
	var props map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&props))
	resp.Body.Close()
	assert.Equal(t, 2.0, props["total_slots"])

	first := postJSON(src+"/completion", body)
	saved := postJSON(src+"/slots/1?action=save", `{"filename": "ten.bin"}`)
	assert.Equal(t, 8.0, saved["n_saved"], "two whole blocks")
	_, err = os.Stat(filepath.Join(slots, "ten.bin"))
	require.NoError(t, err)
	stopSrc()
	require.NoError(t, <-srcDone)

	dst, stopDst, dstDone, _ := startServe(t, cachedVariant, args...)
	restored := postJSON(dst+"/slots/1?action=restore", `{"filename": "ten.bin"}`)
	assert.Equal(t, 8.0, restored["n_restored"])
	again := postJSON(dst+"/completion", body)
	assert.Equal(t, 8.0, again["tokens_cached"])
	assert.Equal(t, first["tokens"], again["tokens"])
	stopDst()
	require.NoError(t, <-dstDone)

	err = Serve(context.Background(), cachedVariant, []string{"-model", dir, "-port", "0", "-slot-save-path", slots}, nil, io.Discard)
	assert.ErrorContains(t, err, "-slot-save-path needs -prefix-caching")
}
