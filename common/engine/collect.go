package engine

// Result is everything one request produced.
type Result struct {
	Tokens []int32
	// Logits holds, per generated token, the logits it was sampled from
	// (only with Request.KeepLogits).
	Logits [][]float32
	Reason string
	Err    error
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
		res[r.ID] = &Result{}
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
		if o.Err != nil {
			r.Err = o.Err
		} else {
			r.Tokens = append(r.Tokens, o.Token)
			if o.Logits != nil {
				r.Logits = append(r.Logits, o.Logits)
			}
		}
		if o.Done {
			r.Reason = o.Reason
		}
	}
}
