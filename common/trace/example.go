package trace

import (
	"fmt"
	"io"

	"kvlab/common/engine"
)

// WorkedExampleConfig returns the engine settings of the worked example
// (docs/phase08_trace.md): blocks of 4 tokens, a pool of 8 blocks small
// enough that the last request evicts, an 8-token step budget so prompts
// take more than one chunk, and the ownership audit after every step.
func WorkedExampleConfig() engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 8
	c.MaxBatchTokens = 8
	c.MaxRunning = 4
	c.Audit = true
	return c
}

// system is the example's shared system prompt: two blocks.
var system = []int32{10, 11, 12, 13, 14, 15, 16, 17}

func withSystem(rest ...int32) []int32 { return append(append([]int32(nil), system...), rest...) }

// exampleRequest is one request of the script and when it arrives.
type exampleRequest struct {
	engine.Request
	at    int // submitted before this step (1-based); 0: see after
	after int // submitted once this request has finished, its prompt extended by its output
	what  string
}

// exampleScript is the worked example: a question after a system prompt,
// a second one that arrives while the first is still prefilling, the first
// conversation's next turn, and a request sampled twice.
func exampleScript() []exampleRequest {
	greedy := engine.Sampling{}
	return []exampleRequest{
		{Request: engine.Request{ID: 1, Prompt: withSystem(20, 21, 22), MaxTokens: 3, IgnoreEOS: true, Sampling: greedy}, at: 1,
			what: "system prompt + question"},
		{Request: engine.Request{ID: 2, Prompt: withSystem(30, 31, 32, 33, 34), MaxTokens: 2, IgnoreEOS: true, Sampling: greedy}, at: 2,
			what: "system prompt + another question, arriving during r1's prefill"},
		{Request: engine.Request{ID: 3, Prompt: []int32{40, 41}, MaxTokens: 2, IgnoreEOS: true, Sampling: greedy}, after: 1,
			what: "r1's next chat turn: r1's prompt and answer + 2 tokens"},
		{Request: engine.Request{ID: 4, Prompt: withSystem(50, 51, 52), MaxTokens: 3, N: 2, IgnoreEOS: true,
			Sampling: engine.Sampling{Temperature: 1, TopP: 1, Seed: 7}}, at: 5,
			what: "system prompt + a third question, two samples (n=2)"},
	}
}

// RunWorkedExample runs the worked example on e, which should be built from
// WorkedExampleConfig with a prefix cache and, to see anything, a Trace. It
// writes the requests as they are submitted and each one's output once
// it finishes to w.
func RunWorkedExample(e *engine.Engine, w io.Writer) error {
	script := exampleScript()
	done := map[int][]int32{} // request → sample 0's output
	outputs := map[int][][]int32{}
	submitted := map[int]bool{}
	ended := map[int]int{} // request → samples done
	samples := map[int]int{}
	for _, r := range script {
		samples[r.ID] = max(r.N, 1)
	}
	for step := 1; ; step++ {
		for i := range script {
			r := &script[i]
			if submitted[r.ID] {
				continue
			}
			switch {
			case r.at == step:
			case r.after != 0 && done[r.after] != nil:
				var prev *exampleRequest
				for j := range script {
					if script[j].ID == r.after {
						prev = &script[j]
					}
				}
				r.Prompt = append(append(append([]int32(nil), prev.Prompt...), done[r.after]...), r.Prompt...)
			default:
				continue
			}
			submitted[r.ID] = true
			if _, err := fmt.Fprintf(w, "submit r%d: %d tokens %v (%s)\n", r.ID, len(r.Prompt), r.Prompt, r.what); err != nil {
				return err
			}
			if err := e.Submit(r.Request); err != nil {
				return err
			}
		}
		if !e.Busy() && len(submitted) == len(script) {
			return nil
		}
		if step > 1000 {
			return fmt.Errorf("trace example: still busy after %d steps", step)
		}
		var finished []int
		for _, o := range e.Step() {
			if o.Err != nil {
				return fmt.Errorf("trace example: request %d: %w", o.ID, o.Err)
			}
			for len(outputs[o.ID]) <= o.Sample {
				outputs[o.ID] = append(outputs[o.ID], nil)
			}
			outputs[o.ID][o.Sample] = append(outputs[o.ID][o.Sample], o.Token)
			if o.Done {
				if ended[o.ID]++; ended[o.ID] == samples[o.ID] {
					finished = append(finished, o.ID)
				}
			}
		}
		for _, id := range finished {
			done[id] = outputs[id][0]
			out := fmt.Sprint(outputs[id][0])
			for i, o := range outputs[id][1:] {
				out += fmt.Sprintf(", sample %d %v", i+1, o)
			}
			if _, err := fmt.Fprintf(w, "finish r%d: output %s\n", id, out); err != nil {
				return err
			}
		}
	}
}
