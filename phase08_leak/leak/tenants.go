package leak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
)

// CostConfig sizes the cost-of-salting workload: tenants that legitimately
// send one shared system prompt, each followed by a question of their own.
type CostConfig struct {
	Tenants   int // tenants of the shared-prompt service
	PerTenant int // requests each tenant sends
	System    int // tokens of the shared system prompt
	Question  int // tokens of each request's own question
	Seed      uint64
}

// SaltPolicy names the cache salt tenant t sends.
type SaltPolicy struct {
	Name string
	Salt func(tenant int) string
}

// SaltPolicies are the three ways of running the shared-prompt service:
// one cache for all, a private cache per tenant, and one salt shared by
// every tenant of this service (the pattern vLLM documents for a prompt
// tenants are meant to share).
var SaltPolicies = []SaltPolicy{
	{"no salt", func(int) string { return "" }},
	{"salt per tenant", func(t int) string { return fmt.Sprintf("tenant-%d", t) }},
	{"one salt for the shared-prompt service", func(int) string { return "service-faq" }},
}

// Usage is a fleet's prompt and cached tokens, as the servers' usage
// reported them.
type Usage struct{ Cached, Prompt int }

// HitRate is cached tokens over prompt tokens.
func (u Usage) HitRate() float64 {
	if u.Prompt == 0 {
		return 0
	}
	return float64(u.Cached) / float64(u.Prompt)
}

// Cost sends the workload, round-robin over tenants one request at a time,
// to a fresh server under policy p and sums what usage reported.
func Cost(ctx context.Context, c Client, p SaltPolicy, cfg CostConfig) (Usage, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 29))
	system := tokens(rng, cfg.System)
	var u Usage
	for range cfg.PerTenant {
		for t := range cfg.Tenants {
			pr, err := c.Send(ctx, p.Salt(t), append(slices.Clone(system), tokens(rng, cfg.Question)...))
			if err != nil {
				return u, err
			}
			u.Cached += pr.Cached
			u.Prompt += pr.Prompt
		}
	}
	return u, nil
}

// NoisyConfig sizes the noisy-neighbour workload. Each round a quiet
// tenant sends its system prompt plus a question, and a noisy tenant, at
// the same step, Flood prompts it never sent before; the pool is small
// enough that the flood alone fills it.
type NoisyConfig struct {
	Blocks    int // KV pool size in blocks
	BlockSize int
	System    int // tokens of the quiet tenant's system prompt
	Question  int // tokens of each quiet request's own question
	Flood     int // noisy prompts per round
	FloodLen  int // tokens of each noisy prompt
	Rounds    int
	Seed      uint64
}

// Noisy runs the workload on an engine in this process, stepped until each
// round is done (no clocks: the numbers repeat exactly), with newCache as
// the prefix cache, capped at share of the cached blocks per salt when
// share > 0, and the ownership audit on after every step. It returns the
// quiet and the noisy tenant's usage.
func Noisy(m *model.Model, newCache func(*kvcache.Allocator, int) kvcache.PrefixCache, share float64, cfg NoisyConfig) (quiet, noisy Usage, err error) {
	ec := engine.DefaultConfig()
	ec.NumBlocks, ec.BlockSize = cfg.Blocks, cfg.BlockSize
	ec.MaxBatchTokens = max(ec.MaxBatchTokens, cfg.FloodLen+1)
	ec.PrefixCache = newCache
	if share > 0 {
		ec.PrefixCache = kvcache.ShareCapped(newCache, share)
	}
	ec.Audit = true
	e, err := engine.New(m, ec)
	if err != nil {
		return quiet, noisy, err
	}
	defer e.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 31))
	system := tokens(rng, cfg.System)
	id := 0
	for range cfg.Rounds {
		salts := map[int]string{}
		lens := map[int]int{}
		submit := func(salt string, prompt []int32) error {
			id++
			salts[id], lens[id] = salt, len(prompt)
			return e.Submit(engine.Request{ID: id, Prompt: prompt, MaxTokens: 1, IgnoreEOS: true, CacheSalt: salt})
		}
		if err := submit("quiet", append(slices.Clone(system), tokens(rng, cfg.Question)...)); err != nil {
			return quiet, noisy, err
		}
		for range cfg.Flood {
			if err := submit("noisy", tokens(rng, cfg.FloodLen)); err != nil {
				return quiet, noisy, err
			}
		}
		for e.Busy() {
			for _, o := range e.Step() {
				if o.Err != nil {
					return quiet, noisy, o.Err
				}
				if !o.Done {
					continue
				}
				u := &noisy
				if salts[o.ID] == "quiet" {
					u = &quiet
				}
				u.Cached += o.Cached
				u.Prompt += lens[o.ID]
			}
		}
	}
	return quiet, noisy, nil
}
