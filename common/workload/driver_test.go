package workload

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
)

func smallParams(name string) Params {
	p := DefaultParams(name)
	p.Requests, p.PrefixLen = 6, 16
	p.SuffixMin, p.SuffixMax = 2, 5
	p.OutputMin, p.OutputMax = 1, 4
	p.Conversations, p.Turns = 3, 3
	p.LongPrompts, p.LongLen = 2, 40
	return p
}

func mustGenerate(t *testing.T, name string, p Params) []Request {
	t.Helper()
	reqs, err := Generate(name, p)
	require.NoError(t, err)
	return reqs
}

func runFake(t *testing.T, eng *fakeEngine, reqs []Request) *metrics.Run {
	t.Helper()
	run, err := Run(eng, reqs, RunOptions{Name: "fake", Clock: eng.clock})
	require.NoError(t, err)
	return run
}

func TestRunCompletesEveryRequest(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			reqs := mustGenerate(t, name, smallParams(name))
			eng := &fakeEngine{clock: newFakeClock(), stepTime: 10 * time.Millisecond}
			run := runFake(t, eng, reqs)

			assert.Equal(t, "fake", run.Name)
			require.Len(t, run.Requests, len(reqs))
			assert.False(t, eng.Busy())
			for i, rec := range run.Requests {
				req := reqs[i]
				assert.Equal(t, req.ID, rec.ID)
				assert.Empty(t, rec.Err)
				assert.Equal(t, req.MaxTokens, rec.OutputLen, "request %d: have %v tokens; want %v", req.ID, rec.OutputLen, req.MaxTokens)
				require.Len(t, rec.TokenTimes, rec.OutputLen)
				assert.GreaterOrEqual(t, rec.Arrival, req.Arrival)
				assert.Greater(t, rec.FirstToken, rec.Arrival, "request %d: a token needs a step after arrival", req.ID)
				assert.Equal(t, rec.TokenTimes[0], rec.FirstToken)
				assert.Equal(t, rec.TokenTimes[len(rec.TokenTimes)-1], rec.Finish)
				assert.IsNonDecreasing(t, rec.TokenTimes)
				if req.FollowUp == nil {
					assert.Equal(t, len(req.Prompt), rec.PromptLen)
				}
			}
			assert.GreaterOrEqual(t, run.Wall, run.Requests[len(reqs)-1].Finish)
		})
	}
}

func TestRunSubmitsInArrivalOrderWithoutWaitingForTheEngine(t *testing.T) {
	p := smallParams("prefix_caching")
	p.Requests, p.RPS = 20, 100 // a request every 10ms
	p.OutputMin, p.OutputMax = 8, 8
	reqs := mustGenerate(t, "prefix_caching", p)

	tests := []struct {
		name     string
		stepTime time.Duration
	}{
		{"fast engine idles between arrivals", time.Millisecond},
		{"slow engine falls behind", 25 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			start := clock.Now()
			eng := &fakeEngine{clock: clock, stepTime: tt.stepTime}
			run := runFake(t, eng, reqs)

			require.Len(t, eng.log, len(reqs))
			for k, s := range eng.log {
				assert.Equal(t, k, s.id, "have submission %d for request %d; want arrival order", k, s.id)
				late := s.at.Sub(start) - reqs[s.id].Arrival
				assert.GreaterOrEqual(t, late, time.Duration(0), "request %d submitted before it arrived", s.id)
				// Open loop: at most one step late, however far behind.
				assert.LessOrEqual(t, late, tt.stepTime, "request %d: have %v late; want <= one step", s.id, late)
			}
			for i, rec := range run.Requests {
				assert.Equal(t, reqs[i].Arrival, rec.Arrival, "have %v; want the scheduled arrival %v", rec.Arrival, reqs[i].Arrival)
			}
		})
	}
}

func TestRunSleepsUntilTheNextArrival(t *testing.T) {
	reqs := []Request{
		{ID: 0, Arrival: 0, Prompt: []int32{1}, MaxTokens: 1},
		{ID: 1, Arrival: 5 * time.Second, Prompt: []int32{2}, MaxTokens: 1},
	}
	eng := &fakeEngine{clock: newFakeClock(), stepTime: time.Millisecond}
	run := runFake(t, eng, reqs)
	assert.Equal(t, 5*time.Second+time.Millisecond, run.Requests[1].FirstToken)
	assert.Equal(t, 5*time.Second+time.Millisecond, run.Wall)
}

func TestRunBuildsMultiTurnPrompts(t *testing.T) {
	p := smallParams("multi_turn")
	p.Think = 100 * time.Millisecond
	reqs := mustGenerate(t, "multi_turn", p)
	eng := &fakeEngine{clock: newFakeClock(), stepTime: 10 * time.Millisecond}
	run := runFake(t, eng, reqs)

	prompts := map[int][]int32{}
	for _, s := range eng.log {
		prompts[s.id] = s.prompt
	}
	require.Len(t, prompts, len(reqs))
	for i, req := range reqs {
		rec := run.Requests[i]
		if req.FollowUp == nil {
			assert.Equal(t, req.Prompt, prompts[req.ID])
			continue
		}
		prev := run.Requests[req.FollowUp.Prev]
		// The fake engine answers request n with tokens equal to n.
		answer := make([]int32, prev.OutputLen)
		for k := range answer {
			answer[k] = int32(prev.ID)
		}
		want := concat(prompts[prev.ID], answer, req.FollowUp.UserTokens)
		assert.Equal(t, want, prompts[req.ID], "request %d: have %v; want %v", req.ID, prompts[req.ID], want)
		assert.Equal(t, len(want), rec.PromptLen)
		assert.Equal(t, prev.Finish+p.Think, rec.Arrival, "request %d: released at previous finish + think", req.ID)
	}
}

func TestRunFollowUpReleaseRespectsArrival(t *testing.T) {
	reqs := []Request{
		{ID: 0, Prompt: []int32{1}, MaxTokens: 1},
		{ID: 1, Arrival: time.Second, MaxTokens: 1, FollowUp: &FollowUp{Prev: 0, UserTokens: []int32{2}}},
	}
	eng := &fakeEngine{clock: newFakeClock(), stepTime: time.Millisecond}
	run := runFake(t, eng, reqs)
	assert.Equal(t, time.Second, run.Requests[1].Arrival, "have %v; want the later Arrival", run.Requests[1].Arrival)
	assert.Equal(t, []int32{1, 0, 2}, eng.log[1].prompt)
}

func TestRunIsolatesFailures(t *testing.T) {
	p := smallParams("multi_turn")
	p.OutputMin = 2
	reqs := mustGenerate(t, "multi_turn", p)
	// Conversation 0: turn 0 (ID 0) is rejected, so turns 3 and 6 fail.
	// Conversation 1: turn 1 (ID 4) fails mid-generation, so turn 7 fails.
	eng := &fakeEngine{
		clock:    newFakeClock(),
		stepTime: 10 * time.Millisecond,
		reject:   map[int]error{0: errors.New("prompt too long")},
		failAt:   map[int]int{4: 1},
	}
	run := runFake(t, eng, reqs)

	wantErr := map[int]string{
		0: "prompt too long",
		3: "previous turn 0 failed: prompt too long",
		6: "previous turn 3 failed: previous turn 0 failed: prompt too long",
		4: "boom",
		7: "previous turn 4 failed: boom",
	}
	for _, rec := range run.Requests {
		assert.Equal(t, wantErr[rec.ID], rec.Err, "request %d", rec.ID)
		if rec.Err == "" {
			assert.Equal(t, reqs[rec.ID].MaxTokens, rec.OutputLen, "request %d is unaffected", rec.ID)
		}
	}
	assert.Equal(t, 1, run.Requests[4].OutputLen, "tokens before the error are kept")
	assert.Equal(t, 5, run.Summary().Failed)
}

func TestRunRecordsCachedTokens(t *testing.T) {
	reqs := mustGenerate(t, "prefix_caching", smallParams("prefix_caching"))
	eng := cachingEngine{&fakeEngine{clock: newFakeClock(), stepTime: time.Millisecond, cached: map[int]int{2: 16, 3: 16}}}
	run, err := Run(eng, reqs, RunOptions{Clock: eng.clock})
	require.NoError(t, err)
	assert.Equal(t, 16, run.Requests[2].CachedTokens)
	assert.Equal(t, 0, run.Requests[0].CachedTokens)
	assert.Positive(t, run.Summary().HitRate)
}

func TestRunMetricsAndProgress(t *testing.T) {
	reqs := mustGenerate(t, "no_shared_prefix", smallParams("no_shared_prefix"))
	eng := &fakeEngine{clock: newFakeClock(), stepTime: 10 * time.Millisecond}
	var bar bytes.Buffer
	run, err := Run(eng, reqs, RunOptions{Name: "x", Clock: eng.clock, Progress: &bar})
	require.NoError(t, err)

	s := run.Summary()
	wantOut := 0
	for _, r := range reqs {
		wantOut += r.MaxTokens
	}
	assert.Equal(t, len(reqs), s.Completed)
	assert.Equal(t, wantOut, s.OutputTokens)
	assert.Equal(t, len(reqs), s.TTFT.N)
	assert.Equal(t, wantOut-len(reqs), s.ITL.N)
	assert.Equal(t, 10*time.Millisecond, s.ITL.P50, "one token per 10ms step")
	assert.Positive(t, s.OutputTokensPerSec)
	assert.Contains(t, bar.String(), "6/6")
	assert.True(t, strings.HasSuffix(bar.String(), "\n"))
}

func TestRunRealClock(t *testing.T) {
	p := smallParams("prefix_caching")
	p.RPS = 1000
	reqs := mustGenerate(t, "prefix_caching", p)
	eng := &fakeEngine{clock: newFakeClock()} // its clock only stamps submissions
	run, err := Run(eng, reqs, RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, run.Summary().Failed)
	assert.GreaterOrEqual(t, run.Wall, reqs[len(reqs)-1].Arrival)
}

func TestRunRejectsMalformedInput(t *testing.T) {
	one := func(id int, f *FollowUp) Request {
		return Request{ID: id, Prompt: []int32{1}, MaxTokens: 1, FollowUp: f}
	}
	tests := []struct {
		name string
		reqs []Request
		want string
	}{
		{"duplicate ID", []Request{one(1, nil), one(1, nil)}, "duplicate request ID 1"},
		{"unknown Prev", []Request{one(0, &FollowUp{Prev: 9})}, "follows unknown request 9"},
		{"self cycle", []Request{one(0, &FollowUp{Prev: 0})}, "cycle"},
		{"two-turn cycle", []Request{one(0, &FollowUp{Prev: 1}), one(1, &FollowUp{Prev: 0})}, "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{clock: newFakeClock()}
			_, err := Run(eng, tt.reqs, RunOptions{Clock: eng.clock})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// rogueEngine breaks the Token convention.
type rogueEngine struct {
	events []Token
	busy   bool
}

func (e *rogueEngine) Submit(int, []int32, int) error { e.busy = true; return nil }
func (e *rogueEngine) Step() []Token                  { e.busy = false; return e.events }
func (e *rogueEngine) Busy() bool                     { return e.busy }

func TestRunRejectsRogueEngines(t *testing.T) {
	reqs := []Request{{ID: 0, Prompt: []int32{1}, MaxTokens: 2}}
	tests := []struct {
		name   string
		events []Token
		want   string
	}{
		{"unknown ID", []Token{{ID: 7}}, "unknown request 7"},
		{"token after done", []Token{{ID: 0, Done: true}, {ID: 0}}, "not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(&rogueEngine{events: tt.events}, reqs, RunOptions{Clock: newFakeClock()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestRunFailsRequestsTheEngineDrops(t *testing.T) {
	reqs := []Request{
		{ID: 0, Prompt: []int32{1}, MaxTokens: 2},
		{ID: 1, MaxTokens: 1, FollowUp: &FollowUp{Prev: 0}},
	}
	// The engine goes idle after one step without a Done event.
	run, err := Run(&rogueEngine{events: []Token{{ID: 0, Token: 5}}}, reqs, RunOptions{Clock: newFakeClock()})
	require.NoError(t, err)
	assert.Contains(t, run.Requests[0].Err, "engine went idle")
	assert.Equal(t, 1, run.Requests[0].OutputLen)
	assert.Contains(t, run.Requests[1].Err, "previous turn 0 failed")
}
