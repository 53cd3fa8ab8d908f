package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeSamplingDefaultFlags: -n-predict (-n), -temp and -seed are what
// a /completion that names no length, temperature or seed gets, and a bad
// value is refused at start.
func TestServeSamplingDefaultFlags(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, _ := startServe(t, cachedVariant, "-model", dir, "-n", "3", "-temp", "0.5", "-seed", "42")
	resp, err := testClient.Post(url+"/completion", "application/json", strings.NewReader(`{"prompt": [1, 2, 3], "ignore_eos": true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var r struct {
		TokensPredicted int `json:"tokens_predicted"`
		Settings        struct {
			Temperature float64 `json:"temperature"`
			Seed        int64   `json:"seed"`
			NPredict    int     `json:"n_predict"`
		} `json:"generation_settings"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	assert.Equal(t, 3, r.TokensPredicted)
	assert.Equal(t, 3, r.Settings.NPredict)
	assert.Equal(t, 0.5, r.Settings.Temperature)
	assert.Equal(t, int64(42), r.Settings.Seed)
	stop()
	require.NoError(t, <-done)

	err = Serve(t.Context(), cachedVariant, []string{"-model", dir, "-port", "0", "-n-predict", "-2"}, nil, &syncBuffer{})
	require.ErrorContains(t, err, "-n-predict")
}
