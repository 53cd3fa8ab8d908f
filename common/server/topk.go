package server

// topK reads top_k: absent, 0 or below (llama-server's and vLLM's "off")
// keeps every token. llama-server's default, 40, is not this server's:
// a request that names no top_k keeps every token top-p keeps.
func topK(k *int) int {
	if k == nil || *k < 0 {
		return 0
	}
	return *k
}
