package workload

// genMultiTurn builds Conversations chats of Turns turns each. Turn 0 is the
// shared system prompt plus the user's first message; every later turn is a
// FollowUp resending the whole history, so its prompt's prefix is exactly
// the previous turn's prompt and answer: the cache can serve all of it.
//
// Requests are ordered turn by turn (all first turns, then all second
// turns...), so ID t*Conversations+c is turn t of conversation c.
// Conversation c starts at c/RPS; later turns carry that same Arrival, their
// real release being decided by the previous turn's finish.
func genMultiTurn(p Params) ([]Request, error) {
	sizes, toks := newRand(p.Seed, streamSizes), newRand(p.Seed, streamTokens)
	system := randTokens(toks, p.PrefixLen, p.Vocab)
	firsts := distinctTokens(toks, p.Conversations, p.Vocab)
	c := p.Conversations
	reqs := make([]Request, 0, c*p.Turns)
	for turn := range p.Turns {
		for conv := range c {
			id := turn*c + conv
			userLen := uniform(sizes, p.SuffixMin, p.SuffixMax)
			r := Request{
				ID:        id,
				Arrival:   p.arrival(conv),
				MaxTokens: uniform(sizes, p.OutputMin, p.OutputMax),
			}
			if turn == 0 {
				r.Prompt = concat(system, uniqueTokens(toks, firsts[conv], userLen, p.Vocab))
			} else {
				r.FollowUp = &FollowUp{
					Prev:       id - c,
					UserTokens: randTokens(toks, userLen, p.Vocab),
					Think:      p.Think,
				}
			}
			reqs = append(reqs, r)
		}
	}
	return reqs, nil
}
