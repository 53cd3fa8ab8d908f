package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// generator builds a workload from validated params.
type generator func(p Params) ([]Request, error)

var generators = map[string]generator{
	"prefix_caching":   genPrefixCaching,
	"no_shared_prefix": genNoSharedPrefix,
	"chunked_prefill":  genChunkedPrefill,
	"multi_turn":       genMultiTurn,
	"routing":          genRouting,
	"system_prompts":   genSystemPrompts,
}

// Names lists the known workloads, sorted.
func Names() []string {
	names := make([]string, 0, len(generators))
	for n := range generators {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Generate builds the named workload. The same name and params always give
// the same requests. IDs are 0..n-1 in slice order.
//
// Every prompt's unique part starts with a token no other prompt of the
// workload starts its unique part with (while the vocabulary is large
// enough), so prompts share exactly the intended prefix and not one token
// more: a prefix cache's hit rate is then predictable from the params.
func Generate(name string, p Params) ([]Request, error) {
	gen, ok := generators[name]
	if !ok {
		return nil, fmt.Errorf("workload: unknown workload %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return gen(p)
}

// DefaultParams returns the full-size parameters of the named workload, or
// the common ones for an unknown name. They are sized for a fast machine;
// callers with a time budget scale Requests and PrefixLen down.
func DefaultParams(name string) Params {
	p := Params{
		Requests:      48,
		PrefixLen:     1024,
		SuffixMin:     32,
		SuffixMax:     128,
		OutputMin:     32,
		OutputMax:     128,
		RPS:           8,
		Seed:          1,
		Vocab:         256,
		Conversations: 8,
		Turns:         4,
		Think:         500 * time.Millisecond,
		LongPrompts:   4,
		LongLen:       0,
	}
	if name == "chunked_prefill" {
		// Short prompts with long outputs keep many requests decoding when
		// the long prompts arrive, which is when an unchunked prefill
		// stalls everyone's next token.
		p.Requests = 32
		p.SuffixMin, p.SuffixMax = 16, 64
		p.OutputMin, p.OutputMax = 256, 512
		p.RPS = 16
	}
	return p
}
