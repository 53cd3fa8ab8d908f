package workload

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultParamsAreValid(t *testing.T) {
	for _, name := range append(Names(), "unknown") {
		assert.NoError(t, DefaultParams(name).Validate(), name)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Params)
		want   string
	}{
		{"requests", func(p *Params) { p.Requests = 0 }, "-requests must be > 0"},
		{"prefix", func(p *Params) { p.PrefixLen = -1 }, "-prefix-len"},
		{"suffix order", func(p *Params) { p.SuffixMin, p.SuffixMax = 10, 5 }, "-suffix-min (10) must be <= -suffix-max (5)"},
		{"empty suffix", func(p *Params) { p.SuffixMin = 0 }, "-suffix-min must be >= 1"},
		{"output order", func(p *Params) { p.OutputMin, p.OutputMax = 10, 5 }, "-min-tokens (10) must be <= -max-tokens (5)"},
		{"output zero", func(p *Params) { p.OutputMin = 0 }, "-min-tokens must be >= 1"},
		{"rps zero", func(p *Params) { p.RPS = 0 }, "-rps must be > 0"},
		{"rps negative", func(p *Params) { p.RPS = -2 }, "-rps must be > 0"},
		{"vocab", func(p *Params) { p.Vocab = 0 }, "-vocab"},
		{"turns", func(p *Params) { p.Turns = 0 }, "-turns"},
		{"conversations", func(p *Params) { p.Conversations = 0 }, "-conversations"},
		{"think", func(p *Params) { p.Think = -time.Second }, "-think"},
		{"long prompts", func(p *Params) { p.LongPrompts = -1 }, "-long-prompts"},
		{"long len", func(p *Params) { p.LongLen = -1 }, "-long-len"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultParams("prefix_caching")
			tt.change(&p)
			err := p.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want, "have %v; want %v", err, tt.want)
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	p := DefaultParams("prefix_caching")
	p.Requests, p.RPS = 0, 0
	err := p.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-requests")
	assert.Contains(t, err.Error(), "-rps")
}

func TestRegisterFlags(t *testing.T) {
	p := DefaultParams("prefix_caching")
	p.Requests = 12 // a caller's scaled-down default
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p.RegisterFlags(fs)

	assert.Equal(t, "12", fs.Lookup("requests").DefValue, "the caller's value is the default")
	for _, name := range []string{
		"requests", "prefix-len", "suffix-min", "suffix-max", "min-tokens", "max-tokens",
		"rps", "seed", "vocab", "conversations", "turns", "think", "long-prompts", "long-len",
	} {
		f := fs.Lookup(name)
		require.NotNil(t, f, "flag -%s", name)
		assert.Contains(t, f.Usage, "full size", "flag -%s documents its full-size default", name)
	}

	require.NoError(t, fs.Parse([]string{
		"-requests=3", "-prefix-len=7", "-suffix-min=1", "-suffix-max=2", "-min-tokens=4", "-max-tokens=5",
		"-rps=2.5", "-seed=9", "-vocab=100", "-conversations=2", "-turns=6", "-think=2s",
		"-long-prompts=1", "-long-len=50",
	}))
	want := Params{
		Requests: 3, PrefixLen: 7, SuffixMin: 1, SuffixMax: 2, OutputMin: 4, OutputMax: 5,
		RPS: 2.5, Seed: 9, Vocab: 100, Conversations: 2, Turns: 6, Think: 2 * time.Second,
		LongPrompts: 1, LongLen: 50,
	}
	assert.Equal(t, want, p, "have %+v; want %+v", p, want)
}

// TestMaxTokensAloneFixesTheLength pins the two output-length flags: -max-tokens
// alone fixes every request's length, as generate's does, in either order
// with -min-tokens the two bound a range, and the defaults stay a range.
func TestMaxTokensAloneFixesTheLength(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		min, max int
	}{
		{nil, 32, 128},
		{[]string{"-max-tokens", "8"}, 8, 8},
		{[]string{"-min-tokens", "2", "-max-tokens", "9"}, 2, 9},
		{[]string{"-max-tokens", "9", "-min-tokens", "2"}, 2, 9},
		{[]string{"-min-tokens", "40"}, 40, 128},
	} {
		p := DefaultParams("prefix_caching")
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p.RegisterFlags(fs)
		require.NoError(t, fs.Parse(tc.args))
		assert.Equal(t, [2]int{tc.min, tc.max}, [2]int{p.OutputMin, p.OutputMax}, "%v: have [min max]; want", tc.args)
	}
}
