package workload

import "fmt"

// genChunkedPrefill sends Requests short prompts with long outputs first,
// then LongPrompts long prompts while the short ones are still decoding. An
// engine that prefills a long prompt in one step delays every decoding
// request's next token by that whole prefill; chunking bounds the delay.
func genChunkedPrefill(p Params) ([]Request, error) {
	longLen := p.longLen()
	if p.LongPrompts > 0 && longLen == 0 {
		return nil, fmt.Errorf("workload: chunked_prefill needs -long-len > 0 or -prefix-len > 0 for its long prompts")
	}
	sizes, toks := newRand(p.Seed, streamSizes), newRand(p.Seed, streamTokens)
	n := p.Requests + p.LongPrompts
	firsts := distinctTokens(toks, n, p.Vocab)
	reqs := make([]Request, n)
	for i := range reqs {
		promptLen := longLen
		if i < p.Requests {
			promptLen = uniform(sizes, p.SuffixMin, p.SuffixMax)
		}
		reqs[i] = Request{
			ID:        i,
			Arrival:   p.arrival(i),
			Prompt:    uniqueTokens(toks, firsts[i], promptLen, p.Vocab),
			MaxTokens: uniform(sizes, p.OutputMin, p.OutputMax),
		}
	}
	return reqs, nil
}
