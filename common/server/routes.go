package server

import "net/http"

// llama-server answers the same endpoint on several paths (the OpenAI ones
// without /v1, its legacy singulars), and answers an endpoint whose
// feature it was not started with by a 501 that names the flag, never a
// 404. A client written for llama-server (its own test suite among them)
// finds every path here: the ones this server implements under each of
// their names, the others with llama-server's 501 for the feature off.

// addLlamaRoutes adds llama-server's other names of the endpoints in
// h.mux, and its endpoints this server does not implement.
func (h *Handler) addLlamaRoutes() {
	for alias, path := range map[string]string{
		"/completions":                   "/completion", // llama-server's own shape, not OpenAI's: as llama-server routes it
		"/chat/completions":              "/v1/chat/completions",
		"/chat/completions/input_tokens": "/v1/chat/completions/input_tokens",
		"/models":                        "/v1/models",
	} {
		h.mux[alias] = h.mux[path]
	}
	embeddings := h.notSupported("This server does not support embeddings. Start it with `--embeddings`")
	rerank := h.notSupported("This server does not support reranking. Start it with `--reranking`")
	for path, serve := range map[string]func(http.ResponseWriter, *http.Request){
		"/embedding":     embeddings,
		"/embeddings":    embeddings,
		"/v1/embeddings": embeddings,
		"/rerank":        rerank,
		"/reranking":     rerank,
		"/v1/rerank":     rerank,
		"/v1/reranking":  rerank,
		// The model has no fill-in-the-middle tokens: llama-server says
		// so for such a model, naming the first one it looks for.
		"/infill": h.notSupported("Infill is not supported by this model: prefix token is missing"),
	} {
		h.mux[path] = route{http.MethodPost: serve}
	}
	h.mux["/lora-adapters"] = route{http.MethodGet: h.loraAdapters, http.MethodPost: h.setLoraAdapters}
}

// notSupported returns a handler that answers llama-server's 501 with msg.
func (h *Handler) notSupported(msg string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { writeError(w, errNotSupported(msg)) }
}

// setProps is POST /props, which llama-server refuses unless started with
// --props; this server has no such flag, so it always refuses.
func (h *Handler) setProps(w http.ResponseWriter, r *http.Request) {
	writeError(w, errNotSupported("This server does not support changing global properties. Start it with `--props`"))
}

// listSlots is GET /slots, or llama-server's 501 with Options.NoSlots.
func (h *Handler) listSlots(w http.ResponseWriter, r *http.Request) {
	if h.opts.NoSlots {
		writeError(w, errNotSupported("This server does not support slots endpoint. Start it with `--slots`"))
		return
	}
	h.getSlots(w, r)
}

// loraAdapters is GET /lora-adapters: the server loads no adapter, so
// the list is empty, as llama-server's is without --lora.
func (h *Handler) loraAdapters(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []any{})
}

// setLoraAdapters is POST /lora-adapters: a list of {id, scale}. With no
// adapter loaded, every id is out of range: llama-server's 400; an empty
// list changes nothing and succeeds.
func (h *Handler) setLoraAdapters(w http.ResponseWriter, r *http.Request) {
	var body []struct {
		ID    *int     `json:"id"`
		Scale *float64 `json:"scale"`
	}
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &body); e != nil {
		writeError(w, e)
		return
	}
	if len(body) > 0 {
		writeError(w, errBadRequest("id", "invalid adapter id: this server loads no LoRA adapter"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}
