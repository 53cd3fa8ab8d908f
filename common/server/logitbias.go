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
// (llama-server's ban, -Inf). Token texts as keys, which llama-server also
// takes, are refused: the bias would land on whatever the text tokenizes
// to, which a client cannot see.
func parseLogitBias(raw json.RawMessage) ([]engine.Bias, *apiError) {
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
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k, b := range obj {
			id, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return nil, bad("logit_bias keys must be token ids, have %q (token texts are not supported)", k)
			}
			if e := add(id, b); e != nil {
				return nil, e
			}
		}
		sortBiases(out) // map order is random; the engine adds them in order
		return out, nil
	}
	var pairs [][]json.RawMessage
	if json.Unmarshal(raw, &pairs) != nil {
		return nil, bad("logit_bias must be an object from token ids to biases, or an array of [id, bias] pairs")
	}
	for i, p := range pairs {
		var id int64
		if len(p) != 2 || json.Unmarshal(p[0], &id) != nil {
			return nil, bad("logit_bias[%d] must be a pair [token id, bias] (token texts are not supported)", i)
		}
		if e := add(id, p[1]); e != nil {
			return nil, e
		}
	}
	return out, nil
}

func sortBiases(b []engine.Bias) {
	slices.SortFunc(b, func(x, y engine.Bias) int { return cmp.Compare(x.ID, y.ID) })
}
