package main

import (
	"fmt"
	"math/rand/v2"

	"kvlab/common/workload"
)

// servingRun is one kind of serving run: with or without a shared
// prefix, beside some CPU hogs or none.
type servingRun struct {
	shared bool
	hogs   int
}

// label names the run in the serving table.
func (k servingRun) label() string {
	s := "no shared prefix"
	if k.shared {
		s = "shared prefix"
	}
	if k.hogs > 0 {
		s += fmt.Sprintf(", under load (%d hogs)", k.hogs)
	}
	return s
}

// servingRuns are the runs of every round: the shared-prefix run, the
// neutral one beside it, and both again under load with -hogs.
func servingRuns(hogs int) []servingRun {
	out := []servingRun{{shared: true}, {shared: false}}
	if hogs > 0 {
		out = append(out, servingRun{shared: true, hogs: hogs}, servingRun{shared: false, hogs: hogs})
	}
	return out
}

// servingRequests is the workload of serving run k in a round: -requests
// requests, each -system-len tokens of system prompt, then a suffix of
// -suffix-min to -suffix-max tokens, generating -output tokens
// (workload.SystemPrompts), a new set each round and the same for every
// server.
//
// With k.shared, the system prompts are -system-prompts shared ones, so
// the prefix cache finds them. Without, each request's system prompt is
// its own, starting with a token no other request starts with: the same
// count, lengths and outputs, nothing to reuse. The pair tells how much
// of the shared run's figure is the cache and how much the engine.
//
// A run under load is its idle twin with every token id renamed by one
// permutation of the vocabulary: the same lengths and the same sharing,
// in tokens the servers' caches have not seen this round.
func servingRequests(o options, vocab, round int, k servingRun) ([]workload.Request, error) {
	seed := int64(2000 + round)
	reqs, err := workload.SystemPrompts(workload.Params{
		Requests: o.requests, PrefixLen: o.systemLen, SuffixMin: o.suffixMin, SuffixMax: o.suffixMax,
		OutputMin: o.output, OutputMax: o.output, RPS: 1, Seed: seed, Vocab: vocab,
		Conversations: 1, Turns: 1,
	}, o.systems)
	if err != nil {
		return nil, err
	}
	if !k.shared {
		if err := ownSystemPrompts(reqs, o.systemLen, vocab, seed); err != nil {
			return nil, err
		}
	}
	if k.hogs > 0 {
		rename := rand.New(rand.NewPCG(uint64(seed), uint64(k.hogs))).Perm(vocab)
		for _, q := range reqs {
			for j, id := range q.Prompt {
				q.Prompt[j] = int32(rename[id])
			}
		}
	}
	return reqs, nil
}

// ownSystemPrompts replaces the first n tokens of each request's prompt
// with tokens of its own, the first unlike any other request's.
func ownSystemPrompts(reqs []workload.Request, n, vocab int, seed int64) error {
	if len(reqs) > vocab {
		return fmt.Errorf("the run without a shared prefix starts each of its %d requests with its own token, and the vocabulary has %d", len(reqs), vocab)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6e65_7574_7261_6c00))
	firsts := r.Perm(vocab)
	for i, q := range reqs {
		head := q.Prompt[:n] // SystemPrompts gives each request a slice of its own
		head[0] = int32(firsts[i])
		for j := 1; j < len(head); j++ {
			head[j] = int32(r.IntN(vocab))
		}
	}
	return nil
}
