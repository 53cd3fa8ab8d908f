package server

// Defaults are the sampling settings a request gets for the fields it
// leaves out: serve's --temp, --seed and --n-predict, as llama-server's
// flags of those names. A nil field leaves each endpoint its own default:
// llama-server's on /completion (temperature 0.8, a random seed, no
// length limit), OpenAI's on the /v1 endpoints (temperature 1, a random
// seed, 16 tokens on /v1/completions, the context on chat).
type Defaults struct {
	Temperature *float64
	Seed        *int64 // -1: a random seed per request
	NPredict    *int   // -1: until the end of the sequence or the context
}

// temperature is t if the request named one, else the server's default,
// else def. A negative temperature is greedy sampling, as llama-server
// takes it.
func (d Defaults) temperature(t *float64, def float64) float64 {
	switch {
	case t != nil:
		def = *t
	case d.Temperature != nil:
		def = *d.Temperature
	}
	return max(def, 0)
}

// seed is the request's seed if it named one, else the server's default;
// ok is false when neither did, or one is -1 (a random seed).
func (d Defaults) seed(s *int64) (seed uint64, ok bool) {
	if s == nil {
		s = d.Seed
	}
	if s == nil || *s == -1 {
		return 0, false
	}
	return uint64(*s), true
}
