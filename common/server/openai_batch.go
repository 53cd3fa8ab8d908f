package server

import (
	"context"
	"net/http"
	"time"
)

// openAIReplyBatch answers a /v1/completions request with several
// prompts, as OpenAI's API does: every prompt is its own generation, all
// running at once, and its n samples are the choices prompt·n to
// prompt·n+n-1, so the indexes follow the prompts' order. Streamed, the
// chunks of all prompts interleave, each naming its choice; whole, the
// answer has every choice in index order and the usage of all prompts. The
// first failure cancels the others and is the answer. s sees one result
// whose samples are every prompt's, in index order.
func (h *Handler) openAIReplyBatch(w http.ResponseWriter, r *http.Request, q *openAIRequest, g genRequest, prompts [][]int32, s replyShape) {
	var out *sse
	if q.Stream {
		out = newSSE(w)
	}
	results := make([]*genResult, len(prompts))
	fails := h.sideBySide(r.Context(), len(prompts), func(ctx context.Context, i int) (f *apiError) {
		gi := g
		gi.prompt = prompts[i]
		results[i], f = h.generate(ctx, h.newID(), gi, func(pc piece) error {
			if out == nil {
				return nil
			}
			pc.sample += i * g.n
			for _, c := range s.chunk(pc) {
				if err := out.send(c); err != nil {
					return err
				}
			}
			return nil
		})
		return f
	})
	if reportFailure(w, r, out, fails) {
		return
	}
	all := mergeResults(results)
	if out == nil {
		writeJSON(w, http.StatusOK, s.whole(all))
		return
	}
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		if out.send(s.usage(all)) != nil {
			return
		}
	}
	_ = out.raw([]byte("[DONE]"))
}

// mergeResults sums up the generations of a batch as one: every sample in
// order, the tokens added up, the time from the first start to the last
// token.
func mergeResults(rs []*genResult) *genResult {
	all := &genResult{slot: rs[0].slot, start: rs[0].start}
	for _, r := range rs {
		all.promptTokens += r.promptTokens
		all.cached += r.cached
		all.completion += r.completion
		all.samples = append(all.samples, r.samples...)
		all.start = earliest(all.start, r.start)
		all.firstToken = earliest(all.firstToken, r.firstToken)
		if r.lastToken.After(all.lastToken) {
			all.lastToken = r.lastToken
		}
	}
	return all
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
