package server

import (
	"net/http"
	"net/url"
)

// CORS is how the server answers cross-origin requests, llama-server's
// --cors-origins, --cors-methods, --cors-headers and --cors-credentials.
// The zero value is llama-server's default: any origin, with credentials.
type CORS struct {
	// Origins is "*" (any origin), "localhost" (an Origin on localhost,
	// 127.0.0.1 or ::1 only) or a list sent as it is; "" means "*".
	Origins string
	// Methods and Headers are what a preflight allows; "" means
	// DefaultCORSMethods and "*".
	Methods, Headers string
	// NoCredentials says a preflight does not allow credentials; with
	// credentials and Origins "*", the request's Origin is echoed, as a
	// browser refuses "*" with credentials.
	NoCredentials bool
}

// DefaultCORSMethods is llama-server's --cors-methods default.
const DefaultCORSMethods = "GET, POST, DELETE, OPTIONS"

// corsPreflight does CORS as llama-server does: every answer carries the
// origin it allows, and a preflight OPTIONS (whatever its path) is
// answered here, before the API key is asked for, because browsers send
// no Authorization header on a preflight. It reports whether it answered
// r.
func (c CORS) corsPreflight(w http.ResponseWriter, r *http.Request) bool {
	origins := c.Origins
	if origins == "" {
		origins = "*"
	}
	origin := r.Header.Get("Origin")
	switch {
	case origins == "*" && !c.NoCredentials:
		w.Header().Set("Access-Control-Allow-Origin", origin)
	case origins == "localhost":
		if origin != "" && isLocalhost(origin) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
	default:
		w.Header().Set("Access-Control-Allow-Origin", origins)
	}
	if r.Method != http.MethodOptions {
		return false
	}
	methods, headers, credentials := c.Methods, c.Headers, "true"
	if methods == "" {
		methods = DefaultCORSMethods
	}
	if headers == "" {
		headers = "*"
	}
	if c.NoCredentials {
		credentials = "false"
	}
	w.Header().Set("Access-Control-Allow-Credentials", credentials)
	w.Header().Set("Access-Control-Allow-Methods", methods)
	w.Header().Set("Access-Control-Allow-Headers", headers)
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusOK)
	return true
}

// isLocalhost reports whether an Origin names this machine.
func isLocalhost(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
