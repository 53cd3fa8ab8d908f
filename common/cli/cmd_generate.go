package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"kvlab/common/engine"
)

// generateOutput is what generate prints.
type generateOutput struct {
	Prompt []int32 `json:"prompt"`
	Tokens []int32 `json:"tokens"`
	// Samples holds every sample's tokens when -n asks for more than one
	// (Samples[0] equals Tokens).
	Samples [][]int32 `json:"samples,omitempty"`
	Reason  string    `json:"reason"`
}

func runGenerate(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "generate", stderr)
	var rf runtimeFlags
	rf.register(fs, v)
	rf.trace.register(fs, stderr)
	if v.PrefixCache != nil {
		rf.tiers.register(fs)
	}
	prompt := fs.String("prompt", "", "prompt token ids, comma-separated (e.g. 1,2,3)")
	maxTokens := fs.Int("max-tokens", 16, "tokens to generate")
	temperature := fs.Float64("temperature", 0, "sampling temperature; 0 is greedy")
	topP := fs.Float64("top-p", 1, "nucleus sampling threshold in (0, 1]")
	seed := fs.Int64("seed", 0, "sampling seed (an int64, like bench's workload -seed)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-sequence tokens")
	n := fs.Int("n", 1, "number of samples; they share the prompt's KV blocks, and sample i uses seed+i")
	if err := parse(fs, args); err != nil {
		return err
	}
	ids, err := parseTokens(*prompt)
	if err != nil {
		return err
	}
	switch {
	case *maxTokens <= 0:
		return fmt.Errorf("-max-tokens must be at least 1, have %d", *maxTokens)
	case *temperature < 0:
		return fmt.Errorf("-temperature must be ≥ 0, have %v", *temperature)
	case *topP <= 0 || *topP > 1:
		return fmt.Errorf("-top-p must be in (0, 1], have %v", *topP)
	case *n < 1 || *n > engine.MaxSamples:
		return fmt.Errorf("-n must be in [1, %d], have %d", engine.MaxSamples, *n)
	}
	res, err := runOne(v, &rf, stderr, "generate", engine.Request{
		Prompt: ids, MaxTokens: *maxTokens, IgnoreEOS: *ignoreEOS, N: *n,
		Sampling: engine.Sampling{Temperature: *temperature, TopP: *topP, Seed: uint64(*seed)},
	})
	if err != nil {
		return err
	}
	out := generateOutput{Prompt: ids, Tokens: res.Tokens, Reason: res.Reason}
	if len(res.Samples) > 1 {
		out.Samples = res.Samples
	}
	return writeJSON(stdout, out)
}

// logitsOutput is what logits prints.
type logitsOutput struct {
	Prompt []int32   `json:"prompt"`
	Logits []float32 `json:"logits"`
}

func runLogits(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "logits", stderr)
	var rf runtimeFlags
	rf.register(fs, v)
	if v.PrefixCache != nil {
		rf.tiers.register(fs)
	}
	prompt := fs.String("prompt", "", "prompt token ids, comma-separated (e.g. 1,2,3)")
	if err := parse(fs, args); err != nil {
		return err
	}
	ids, err := parseTokens(*prompt)
	if err != nil {
		return err
	}
	// The logits the first output token is sampled from are the last
	// prompt position's.
	res, err := runOne(v, &rf, stderr, "logits", engine.Request{Prompt: ids, MaxTokens: 1, IgnoreEOS: true, KeepLogits: true})
	if err != nil {
		return err
	}
	return writeJSON(stdout, logitsOutput{Prompt: ids, Logits: res.Logits[0]})
}

// runOne loads the model, runs one request to completion and returns its
// result, or the reason it was rejected or failed. With cache tiers it
// says on stderr where the prompt's cached tokens came from, and leaves
// the cache on a disk tier at exit, so the next run of the same prompt
// finds it there.
func runOne(v Variant, rf *runtimeFlags, stderr io.Writer, command string, r engine.Request) (*engine.Result, error) {
	if err := rf.checkTiers(v); err != nil {
		return nil, err
	}
	stop, err := rf.startProfiles()
	if err != nil {
		return nil, err
	}
	defer stop()
	m, err := rf.loadModel()
	if err != nil {
		return nil, err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	cfg, err := rf.engineConfig(v)
	if err != nil {
		return nil, err
	}
	dir, err := rf.dir()
	if err != nil {
		return nil, err
	}
	tiers, err := rf.tiers.open(&cfg, dir, &m.Config, tierHasher, stderr, v.Name+" "+command)
	if err != nil {
		return nil, err
	}
	defer tiers.release()
	e, err := engine.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := tiers.verify(e.Pool()); err != nil {
		return nil, err
	}
	res := e.RunAll([]engine.Request{r})[r.ID]
	if res.Err != nil {
		return nil, res.Err
	}
	if tiers != nil {
		fmt.Fprintf(stderr, "%s %s: %s\n", v.Name, command, tiers.cachedFrom(res.Cached, res.Promoted))
	}
	if err := tiers.shutdown(e.Pool()); err != nil {
		return nil, err
	}
	return res, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
