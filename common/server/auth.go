package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// publicPaths are the endpoints served without an API key, llama-server's
// list: a load balancer's health check must not need the secret, nor a
// browser the page at "/" (home.go), which serves no model output.
var publicPaths = map[string]bool{"/health": true, "/v1/health": true, "/": true, "/index.html": true}

// authorized reports whether r may be served under Options.APIKeys, and
// answers llama-server's 401 when not. The key is read as llama-server
// reads it: the Authorization header, or X-Api-Key (Anthropic's) when
// there is none, with a "Bearer " prefix dropped.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if len(h.opts.APIKeys) == 0 || publicPaths[r.URL.Path] {
		return true
	}
	key := r.Header.Get("Authorization")
	if key == "" {
		key = r.Header.Get("X-Api-Key")
	}
	if validKey(h.opts.APIKeys, strings.TrimPrefix(key, "Bearer ")) {
		return true
	}
	// llama-server's shape, its code a number.
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
		"message": "Invalid API Key", "type": "authentication_error", "code": http.StatusUnauthorized}})
	return false
}

// validKey reports whether key is one of keys, in a time that tells
// nothing of how much of it matched: each comparison is of SHA-256
// digests (so neither the length nor a common prefix shows), with
// crypto/subtle, and every key is compared.
func validKey(keys []string, key string) bool {
	got := sha256.Sum256([]byte(key))
	ok := 0
	for _, k := range keys {
		want := sha256.Sum256([]byte(k))
		ok |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return ok == 1 && key != ""
}
