package server

import "net/http"

// corsPreflight does CORS as llama-server does: every answer allows the
// origin the request names, and a preflight OPTIONS (whatever its path)
// is answered here, before the API key is asked for, because browsers
// send no Authorization header on a preflight. It reports whether it
// answered r.
func corsPreflight(w http.ResponseWriter, r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		w.Header().Set("Access-Control-Allow-Origin", origin)
	}
	if r.Method != http.MethodOptions {
		return false
	}
	w.Header().Set("Access-Control-Allow-Credentials", "true")
	w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
	w.Header().Set("Access-Control-Allow-Headers", "*")
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusOK)
	return true
}
