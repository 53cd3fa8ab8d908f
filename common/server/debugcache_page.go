package server

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
)

// debugPage is GET /debug/cache: one self-contained page, its CSS and
// script inline, that fetches /debug/cache.json, then redraws on every
// event of /debug/cache/events.
//
//go:embed debugcache.html
var debugPage []byte

// debugPageCSP is the page's Content-Security-Policy: nothing but this
// server (default-src 'self'), and of inline code only the page's own
// style and script, named by their hashes. The page shows prompts' tokens,
// so it must not be able to send them anywhere else.
var debugPageCSP = func() string {
	csp := "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	for _, tag := range []struct{ re, dir string }{{`(?s)<style>(.*?)</style>`, "style-src"}, {`(?s)<script>(.*?)</script>`, "script-src"}} {
		m := regexp.MustCompile(tag.re).FindSubmatch(debugPage)
		if m == nil {
			panic("debugcache.html has no " + tag.dir + " block")
		}
		sum := sha256.Sum256(m[1])
		csp += "; " + tag.dir + " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	return csp
}()

// servePage is GET /debug/cache.
func (d *DebugCache) servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", debugPageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(debugPage)
}
