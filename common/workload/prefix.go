package workload

// genPrefixCaching: every prompt is one shared system prompt followed by a
// unique suffix, the case a prefix cache exists for.
func genPrefixCaching(p Params) ([]Request, error) {
	return genSuffixed(p, true), nil
}

// genNoSharedPrefix has the same sizes as prefix_caching but nothing to
// share: the control for measuring what the cache itself costs.
func genNoSharedPrefix(p Params) ([]Request, error) {
	return genSuffixed(p, false), nil
}

func genSuffixed(p Params, shared bool) []Request {
	sizes, toks := newRand(p.Seed, streamSizes), newRand(p.Seed, streamTokens)
	prefix := randTokens(toks, p.PrefixLen, p.Vocab)
	firsts := distinctTokens(toks, p.Requests, p.Vocab)
	reqs := make([]Request, p.Requests)
	for i := range reqs {
		suffixLen := uniform(sizes, p.SuffixMin, p.SuffixMax)
		var prompt []int32
		if shared {
			prompt = concat(prefix, uniqueTokens(toks, firsts[i], suffixLen, p.Vocab))
		} else {
			prompt = uniqueTokens(toks, firsts[i], p.PrefixLen+suffixLen, p.Vocab)
		}
		reqs[i] = Request{
			ID:        i,
			Arrival:   p.arrival(i),
			Prompt:    prompt,
			MaxTokens: uniform(sizes, p.OutputMin, p.OutputMax),
		}
	}
	return reqs
}
