package workload

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Params holds every knob of every workload. Each workload reads the fields
// it needs and ignores the rest, so one flag set serves them all.
type Params struct {
	// Requests is the number of requests; for chunked_prefill, the number of
	// short requests. multi_turn uses Conversations × Turns instead.
	Requests int
	// PrefixLen is the shared system prompt length. chunked_prefill shares
	// nothing and uses it only to size the long prompts.
	PrefixLen int
	// SuffixMin and SuffixMax bound the per-request unique tokens: the
	// suffix after the shared prefix, the whole prompt of a short
	// chunked_prefill request, or the user tokens of a multi_turn turn.
	SuffixMin, SuffixMax int
	// OutputMin and OutputMax bound each request's MaxTokens.
	OutputMin, OutputMax int
	// RPS is the arrival rate: request i arrives at i/RPS seconds
	// (conversation i starts at i/RPS for multi_turn).
	RPS float64
	// Seed makes generation reproducible.
	Seed int64
	// Vocab is the vocabulary size V; token ids are in [0, V). It must not
	// exceed the model's vocabulary.
	Vocab int
	// Conversations and Turns shape multi_turn.
	Conversations, Turns int
	// Think is the pause between receiving an answer and sending the next
	// turn.
	Think time.Duration
	// LongPrompts is how many long prompts chunked_prefill sends after the
	// short requests, each LongLen tokens (0 means 4 × PrefixLen).
	LongPrompts, LongLen int
}

// RegisterFlags registers one flag per field on fs, using p's current values
// as the defaults, so a caller sets its own defaults first (typically
// DefaultParams, scaled to its time budget) and lets the command line
// override them. Usage strings also quote the full-size values of
// DefaultParams, since the registered default may be a scaled-down one.
func (p *Params) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&p.Requests, "requests", p.Requests,
		"number of requests; chunked_prefill: short requests; unused by multi_turn (full size: 48, chunked_prefill 32)")
	fs.IntVar(&p.PrefixLen, "prefix-len", p.PrefixLen,
		"tokens in the shared system prompt; chunked_prefill: sizes the long prompts (full size: 1024)")
	fs.IntVar(&p.SuffixMin, "suffix-min", p.SuffixMin,
		"minimum unique tokens per prompt: suffix, short prompt or user turn (full size: 32, chunked_prefill 16)")
	fs.IntVar(&p.SuffixMax, "suffix-max", p.SuffixMax,
		"maximum unique tokens per prompt (full size: 128, chunked_prefill 64)")
	// -max-tokens alone fixes every request's length, as generate's
	// -max-tokens does; with -min-tokens the two bound a range, drawn per
	// request.
	minSet := false
	fs.Func("min-tokens", fmt.Sprintf("fewest tokens a request generates; with -max-tokens, each request's length is drawn from the range (default %d; full size: 32, chunked_prefill 256)", p.OutputMin),
		func(v string) error {
			n, err := strconv.Atoi(v)
			p.OutputMin, minSet = n, true
			return err
		})
	fs.Func("max-tokens", fmt.Sprintf("most tokens a request generates; given alone, every request generates exactly this many, like generate's -max-tokens (default %d; full size: 128, chunked_prefill 512)", p.OutputMax),
		func(v string) error {
			n, err := strconv.Atoi(v)
			p.OutputMax = n
			if !minSet {
				p.OutputMin = n
			}
			return err
		})
	fs.Float64Var(&p.RPS, "rps", p.RPS,
		"arrivals per second; multi_turn: conversation starts per second (full size: 8, chunked_prefill 16)")
	fs.Int64Var(&p.Seed, "seed", p.Seed,
		"random seed for prompts, lengths and outputs (full size: 1)")
	fs.IntVar(&p.Vocab, "vocab", p.Vocab,
		"vocabulary size V: token ids are drawn from [0, V); must not exceed the model's (full size: 256)")
	fs.IntVar(&p.Conversations, "conversations", p.Conversations,
		"multi_turn: number of conversations (full size: 8)")
	fs.IntVar(&p.Turns, "turns", p.Turns,
		"multi_turn: turns per conversation (full size: 4)")
	fs.DurationVar(&p.Think, "think", p.Think,
		"multi_turn: pause between an answer and the next turn (full size: 500ms)")
	fs.IntVar(&p.LongPrompts, "long-prompts", p.LongPrompts,
		"chunked_prefill: long prompts sent after the short requests (full size: 4)")
	fs.IntVar(&p.LongLen, "long-len", p.LongLen,
		"chunked_prefill: tokens per long prompt, 0 for 4 × prefix-len (full size: 0)")
}

// Validate reports every invalid field at once, named by its flag.
func (p Params) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("workload: "+format, args...))
		}
	}
	check(p.Requests > 0, "-requests must be > 0, have %d", p.Requests)
	check(p.PrefixLen >= 0, "-prefix-len must be >= 0, have %d", p.PrefixLen)
	// A suffix of at least one token lets every prompt start its unique
	// part with a distinct token; see Generate.
	check(p.SuffixMin >= 1, "-suffix-min must be >= 1, have %d", p.SuffixMin)
	check(p.SuffixMin <= p.SuffixMax, "-suffix-min (%d) must be <= -suffix-max (%d)", p.SuffixMin, p.SuffixMax)
	check(p.OutputMin >= 1, "-min-tokens must be >= 1, have %d", p.OutputMin)
	check(p.OutputMin <= p.OutputMax, "-min-tokens (%d) must be <= -max-tokens (%d)", p.OutputMin, p.OutputMax)
	check(p.RPS > 0 && !math.IsInf(p.RPS, 1), "-rps must be > 0 and finite, have %v", p.RPS)
	check(p.Vocab >= 1 && p.Vocab <= math.MaxInt32+1, "-vocab must be in [1, 2^31], have %d", p.Vocab)
	check(p.Conversations >= 1, "-conversations must be >= 1, have %d", p.Conversations)
	check(p.Turns >= 1, "-turns must be >= 1, have %d", p.Turns)
	check(p.Think >= 0, "-think must be >= 0, have %v", p.Think)
	check(p.LongPrompts >= 0, "-long-prompts must be >= 0, have %d", p.LongPrompts)
	check(p.LongLen >= 0, "-long-len must be >= 0, have %d", p.LongLen)
	return errors.Join(errs...)
}

// longLen resolves the LongLen default.
func (p Params) longLen() int {
	if p.LongLen > 0 {
		return p.LongLen
	}
	return 4 * p.PrefixLen
}

// arrival is the fixed arrival time of the i-th request.
func (p Params) arrival(i int) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / p.RPS)
}
