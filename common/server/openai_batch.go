package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
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
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	results := make([]*genResult, len(prompts))
	fails := make([]*apiError, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// net/http recovers only the handler's goroutine: a panic
				// here would end the server (recover.go).
				if p := recover(); p != nil {
					fails[i] = h.recovered(p)
					cancel()
				}
			}()
			gi := g
			gi.prompt = p
			results[i], fails[i] = h.generate(ctx, h.newID(), gi, func(pc piece) error {
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
			if fails[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
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

// reportFailure answers a request whose prompts ran side by side when any
// of them failed, and says whether one did. The first failure that is not
// a 499 is written (as an SSE error event once a stream is open): a 499 is
// a client gone, or a sibling cancelled after another prompt's failure,
// which is reported instead. A panic in any prompt makes the outcome an
// error, not the abort of the siblings it cancelled.
func reportFailure(w http.ResponseWriter, r *http.Request, out *sse, fails []*apiError) bool {
	if slices.ContainsFunc(fails, func(f *apiError) bool { return f != nil && f.Code == errPanicCode }) {
		setOutcome(r.Context(), "error")
	}
	for _, f := range fails {
		if f != nil && f.Status != 499 {
			if out != nil {
				out.fail(f)
			} else {
				writeError(w, f)
			}
			return true
		}
	}
	return slices.ContainsFunc(fails, func(f *apiError) bool { return f != nil })
}
