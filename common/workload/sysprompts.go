package workload

import "fmt"

// SystemPrompts builds the workload of a prefix cache under memory
// pressure: p.Requests single-turn requests, each one of prompts distinct
// system prompts of p.PrefixLen tokens followed by a suffix of its own.
// System prompt k is drawn with weight 1/(k+1), as popularity often falls
// off (a Zipf law): the first is asked for most, the last rarely. A pool
// too small to keep every system prompt cached must choose which to
// evict, and each eviction policy chooses differently.
//
// Two system prompts share no prefix (each starts with its own token), and
// neither do two suffixes, so the only reuse is of whole system prompts.
func SystemPrompts(p Params, prompts int) ([]Request, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if prompts < 1 {
		return nil, fmt.Errorf("workload: the system_prompts workload needs at least one system prompt, have %d", prompts)
	}
	sizes, toks := newRand(p.Seed, streamSizes), newRand(p.Seed, streamTokens)
	starts := distinctTokens(toks, prompts, p.Vocab)
	systems := make([][]int32, prompts)
	var total float64
	for k := range systems {
		systems[k] = uniqueTokens(toks, starts[k], max(p.PrefixLen, 1), p.Vocab)
		total += 1 / float64(k+1)
	}
	firsts := distinctTokens(toks, p.Requests, p.Vocab)
	reqs := make([]Request, p.Requests)
	for i := range reqs {
		k, x := 0, sizes.Float64()*total
		for ; k < prompts-1; k++ {
			x -= 1 / float64(k+1)
			if x < 0 {
				break
			}
		}
		suffixLen := uniform(sizes, p.SuffixMin, p.SuffixMax)
		reqs[i] = Request{
			ID:        i,
			Arrival:   p.arrival(i),
			Prompt:    concat(systems[k], uniqueTokens(toks, firsts[i], suffixLen, p.Vocab)),
			MaxTokens: uniform(sizes, p.OutputMin, p.OutputMax),
		}
	}
	return reqs, nil
}

// genSystemPrompts is SystemPrompts with DefaultSystemPrompts, for the
// name table.
func genSystemPrompts(p Params) ([]Request, error) { return SystemPrompts(p, DefaultSystemPrompts) }
