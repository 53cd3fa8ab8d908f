package server

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"kvlab/common/engine"
)

// maxLogitBias bounds a bias as OpenAI's API does: ±100 is enough to force
// or ban any token of a real model's logits.
const maxLogitBias = 100

// parseLogitBias reads logit_bias in the forms OpenAI and llama-server
// send: an object from token ids (as strings) to biases, or llama-server's
// array of [id, bias] pairs. A bias is a number in [-100, 100], or false
// (llama-server's ban, -Inf). A key (or a pair's first element) may also
// be a text, as llama-server takes it: the bias then lands on every token
// the text encodes to.
func (h *Handler) parseLogitBias(raw json.RawMessage) ([]engine.Bias, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	bad := func(format string, args ...any) *apiError { return errBadRequest("logit_bias", format, args...) }
	var out []engine.Bias
	add := func(id int64, b json.RawMessage) *apiError {
		if id < 0 || id > math.MaxInt32 {
			return bad("logit_bias: token id %d is out of range", id)
		}
		if string(b) == "false" {
			out = append(out, engine.Bias{ID: int32(id), Bias: float32(math.Inf(-1))})
			return nil
		}
		var f float64
		if json.Unmarshal(b, &f) != nil || f < -maxLogitBias || f > maxLogitBias {
			return bad("logit_bias of token %d must be a number in [-%d, %d] or false, have %s", id, maxLogitBias, maxLogitBias, b)
		}
		out = append(out, engine.Bias{ID: int32(id), Bias: float32(f)})
		return nil
	}
	// text applies b to each token of t.
	text := func(t string, b json.RawMessage) *apiError {
		if h.opts.Tokenizer == nil {
			return bad("logit_bias: this model has no tokenizer.json: name tokens by id, have %q", t)
		}
		for _, id := range h.opts.Tokenizer.Encode(t) {
			if e := add(int64(id), b); e != nil {
				return e
			}
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k, b := range obj {
			var e *apiError
			if id, err := strconv.ParseInt(k, 10, 64); err == nil {
				e = add(id, b)
			} else {
				e = text(k, b)
			}
			if e != nil {
				return nil, e
			}
		}
		sortBiases(out) // map order is random: the same biases in the same order
		return out, nil
	}
	var pairs [][]json.RawMessage
	if json.Unmarshal(raw, &pairs) != nil {
		return nil, bad("logit_bias must be an object from token ids to biases, or an array of [id, bias] pairs")
	}
	for i, p := range pairs {
		var id int64
		var t string
		var e *apiError
		switch {
		case len(p) != 2:
			e = bad("logit_bias[%d] must be a pair [token id or text, bias]", i)
		case json.Unmarshal(p[0], &id) == nil:
			e = add(id, p[1])
		case json.Unmarshal(p[0], &t) == nil:
			e = text(t, p[1])
		default:
			e = bad("logit_bias[%d] must be a pair [token id or text, bias]", i)
		}
		if e != nil {
			return nil, e
		}
	}
	return out, nil
}

func sortBiases(b []engine.Bias) {
	slices.SortFunc(b, func(x, y engine.Bias) int { return cmp.Compare(x.ID, y.ID) })
}
