package engine

import "kvlab/common/kvcache/misses"

// Result is everything one request produced.
type Result struct {
	// Tokens and Logits are sample 0's tokens, and the logits each was
	// sampled from (Logits only with Request.KeepLogits).
	Tokens []int32
	Logits [][]float32
	// Samples holds every sample's tokens; Samples[0] equals Tokens.
	Samples [][]int32
	Reason  string // why sample 0 finished
	Err     error
	// Cached and Promoted are the request's Output.Cached and
	// Output.Promoted: prompt tokens found cached, and of them those each
	// cache tier gave.
	Cached   int
	Promoted []int
	// Misses is the request's Output.Misses: why the rest were computed.
	Misses misses.Reasons
}

// RunAll submits reqs, steps until every one of them is finished, and
// returns their results by id. A request the engine rejects gets a result
// holding only the error; the others run normally. Not for use while other
// requests are in flight.
func (e *Engine) RunAll(reqs []Request) map[int]*Result {
	res := make(map[int]*Result, len(reqs))
	for _, r := range reqs {
		if err := e.Submit(r); err != nil {
			res[r.ID] = &Result{Err: err, Reason: "error"}
			continue
		}
		res[r.ID] = &Result{Samples: make([][]int32, r.samples())}
	}
	for e.Busy() {
		e.collect(res, e.Step())
	}
	return res
}

func (e *Engine) collect(res map[int]*Result, outs []Output) {
	for _, o := range outs {
		r := res[o.ID]
		if r == nil {
			continue
		}
		r.Cached, r.Promoted, r.Misses = o.Cached, o.Promoted, o.Misses
		if o.Err != nil {
			r.Err = o.Err
		} else {
			for len(r.Samples) <= o.Sample {
				r.Samples = append(r.Samples, nil)
			}
			r.Samples[o.Sample] = append(r.Samples[o.Sample], o.Token)
			if o.Sample == 0 {
				r.Tokens = append(r.Tokens, o.Token)
				if o.Logits != nil {
					r.Logits = append(r.Logits, o.Logits)
				}
			}
		}
		if o.Done && o.Sample == 0 {
			r.Reason = o.Reason
		}
	}
}
