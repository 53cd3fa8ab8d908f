package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
)

var testVariant = Variant{Name: "testcmd", Summary: "test"}

// run invokes Main and returns the exit code and both streams.
func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(testVariant, args, &o, &e)
	return code, o.String(), e.String()
}

// smallModel writes a tiny model with init-model and returns its directory.
func smallModel(t *testing.T, arch string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	code, _, stderr := run("init-model", "-arch", arch, "-out", dir, "-hidden", "64", "-layers", "2",
		"-heads", "4", "-kv-heads", "2", "-head-dim", "16", "-intermediate", "128", "-vocab", "300")
	require.Equal(t, 0, code, stderr)
	return dir
}

func TestLogitsPrintsOneJSONObject(t *testing.T) {
	dir := smallModel(t, "qwen3")
	code, stdout, stderr := run("logits", "-model", dir, "-prompt", "1,2,3")
	require.Equal(t, 0, code, stderr)
	var out struct {
		Logits []float64 `json:"logits"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	assert.Len(t, out.Logits, 300, "one logit per vocabulary entry")
}

func TestGenerateIsDeterministicAndMatchesLogits(t *testing.T) {
	dir := smallModel(t, "llama")
	code, stdout, stderr := run("generate", "-model", dir, "-prompt", "5,6,7", "-max-tokens", "4", "-ignore-eos")
	require.Equal(t, 0, code, stderr)
	var gen struct {
		Tokens []int32 `json:"tokens"`
		Reason string  `json:"reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &gen))
	require.Len(t, gen.Tokens, 4)
	assert.Equal(t, "length", gen.Reason)

	// The first generated token is the argmax of the prompt's logits.
	_, lout, _ := run("logits", "-model", dir, "-prompt", "5,6,7")
	var lg struct {
		Logits []float32 `json:"logits"`
	}
	require.NoError(t, json.Unmarshal([]byte(lout), &lg))
	best := 0
	for i, v := range lg.Logits {
		if v > lg.Logits[best] {
			best = i
		}
	}
	assert.Equal(t, int32(best), gen.Tokens[0])
}

func TestBadInputGivesClearErrors(t *testing.T) {
	dir := smallModel(t, "llama")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"empty prompt", []string{"generate", "-model", dir, "-prompt", ""}, 1, "empty prompt"},
		{"not a number", []string{"generate", "-model", dir, "-prompt", "1,x"}, 1, `token 1 ("x")`},
		{"token id ≥ vocab", []string{"generate", "-model", dir, "-prompt", "1,300"}, 1, "300"},
		{"max tokens zero", []string{"generate", "-model", dir, "-prompt", "1", "-max-tokens", "0"}, 1, "-max-tokens must be at least 1"},
		{"prompt longer than context", []string{"generate", "-model", dir, "-prompt", "1,2,3,4", "-max-context", "4"}, 1, "context of 4"},
		{"missing model", []string{"logits", "-model", filepath.Join(dir, "nope"), "-prompt", "1"}, 1, "config.json"},
		{"unknown device", []string{"logits", "-model", dir, "-prompt", "1", "-device", "tpu"}, 1, "unknown device"},
		{"cuda in a CPU build", []string{"logits", "-model", dir, "-prompt", "1", "-device", "cuda"}, 1, "without CUDA support"},
		{"unknown command", []string{"fly"}, 2, "unknown command"},
		{"unknown flag", []string{"generate", "-bogus"}, 2, "bogus"},
		{"init without out", []string{"init-model"}, 1, "-out"},
		{"unknown arch", []string{"init-model", "-arch", "gpt2", "-out", t.TempDir()}, 1, "unknown architecture"},
		{"bad engine config", []string{"generate", "-model", dir, "-prompt", "1", "-block-size", "0"}, 1, "block size must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}
}

func TestHelpListsCommands(t *testing.T) {
	code, _, stderr := run("help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"init-model", "logits", "generate", "bench"} {
		assert.True(t, strings.Contains(stderr, c), "help should list %s", c)
	}
}

func TestBenchPrintsTableAndWritesFiles(t *testing.T) {
	dir := smallModel(t, "llama")
	out := t.TempDir()
	jsonPath, plotPath := filepath.Join(out, "run.json"), filepath.Join(out, "ttft.svg")
	for _, w := range []string{"prefix_caching", "no_shared_prefix", "chunked_prefill", "multi_turn"} {
		t.Run(w, func(t *testing.T) {
			code, stdout, stderr := run("bench", "-model", dir, "-workload", w, "-requests", "3", "-prefix-len", "16",
				"-suffix-min", "4", "-suffix-max", "8", "-min-tokens", "2", "-max-tokens", "3", "-rps", "1000",
				"-conversations", "2", "-turns", "2", "-think", "0s", "-long-prompts", "1",
				"-json", jsonPath, "-plot", plotPath, "-quiet")
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, stdout, "TTFT p50")
			assert.Contains(t, stdout, "testcmd")

			data, err := os.ReadFile(jsonPath)
			require.NoError(t, err)
			runs, err := metrics.ReadJSON(bytes.NewReader(data))
			require.NoError(t, err)
			require.Len(t, runs, 1)
			assert.Positive(t, runs[0].Engine.PrefillTokensComputed)
			prompts := 0
			for _, r := range runs[0].Requests {
				assert.Empty(t, r.Err, "request %d", r.ID)
				assert.Positive(t, r.OutputLen, "request %d", r.ID)
				prompts += r.PromptLen
			}
			assert.Equal(t, prompts, runs[0].Engine.PromptTokens, "the engine's prompt tokens are every prompt's length")
			svg, err := os.ReadFile(plotPath)
			require.NoError(t, err)
			assert.Contains(t, string(svg), "<svg")
		})
	}
}

func TestBenchPrintsWhyRequestsFailed(t *testing.T) {
	dir := smallModel(t, "llama")
	// Prompts larger than the whole KV pool fail in the engine, one by one.
	code, stdout, stderr := run("bench", "-model", dir, "-requests", "3", "-prefix-len", "200", "-blocks", "8", "-block-size", "16", "-quiet")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "failed requests, by reason:\n  testcmd: 3 × prompt of")
	assert.Contains(t, stdout, "the KV pool's 8 blocks of 16 tokens hold (numbers vary)")
	assert.Contains(t, stderr, "3 of 3 requests failed")
}

// TestBadFlagsAreRefusedBeforeAnyWork runs every command that takes the
// engine and workload flags with each bad value: a non-zero exit, one line
// naming the flag, no stack trace — and nothing allocated or computed.
func TestBadFlagsAreRefusedBeforeAnyWork(t *testing.T) {
	dir := smallModel(t, "llama")
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"pool too big for the machine", []string{"-block-size", "100000000"}, "-block-size"},
		{"block size zero", []string{"-block-size", "0"}, "-block-size"},
		{"negative blocks", []string{"-blocks", "-3"}, "-blocks"},
		{"batch budget zero", []string{"-max-batch-tokens", "0"}, "-max-batch-tokens"},
		{"max running zero", []string{"-max-running", "0"}, "-max-running"},
		{"context over the model's", []string{"-max-context", "99999999"}, "-max-context"},
		{"negative context", []string{"-max-context", "-1"}, "-max-context"},
		{"unknown admission", []string{"-admission", "greedy"}, "-admission"},
	}
	commands := map[string][]string{
		"generate": {"generate", "-model", dir, "-prompt", "1,2"},
		"bench":    {"bench", "-model", dir, "-requests", "2", "-quiet"},
		"serve":    {"serve", "-model", dir, "-port", "0"},
		"compare":  {"-model", dir, "-requests", "2", "-quiet", "-plot", ""},
	}
	for cmd, base := range commands {
		for _, tc := range cases {
			t.Run(cmd+"/"+tc.name, func(t *testing.T) {
				var o, e bytes.Buffer
				var code int
				if cmd == "compare" {
					code = Compare([]Variant{cachedVariant}, append(slices.Clone(base), tc.args...), &o, &e)
				} else {
					code = Main(cachedVariant, append(slices.Clone(base), tc.args...), &o, &e)
				}
				assert.Equal(t, 1, code)
				assert.Contains(t, e.String(), tc.flag)
				assert.Equal(t, 1, strings.Count(e.String(), "\n"), "one line: %q", e.String())
				assert.NotContains(t, e.String(), "goroutine")
				assert.Empty(t, o.String())
			})
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"vocabulary over the model's", []string{"-vocab", "999999"}, "-vocab"},
		{"prompts over the context", []string{"-prefix-len", "5000", "-max-context", "1024"}, "-prefix-len"},
		{"negative rate", []string{"-rps", "-1"}, "-rps"},
		{"no requests", []string{"-requests", "0"}, "-requests"},
	} {
		t.Run("bench/"+tc.name, func(t *testing.T) {
			code, stdout, stderr := run(append([]string{"bench", "-model", dir, "-requests", "2", "-quiet"}, tc.args...)...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.flag)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.Empty(t, stdout)
		})
	}
}

func TestGenerateRefusesBadSamplingFlags(t *testing.T) {
	dir := smallModel(t, "llama")
	for _, tc := range []struct{ flag, value string }{
		{"-top-p", "0"}, {"-top-p", "1.5"}, {"-n", "0"}, {"-n", "65"}, {"-max-tokens", "-1"}, {"-temperature", "-0.5"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			code, stdout, stderr := run("generate", "-model", dir, "-prompt", "1,2", tc.flag, tc.value)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.flag)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.Empty(t, stdout)
		})
	}
}

func TestBenchRejectsBadWorkloadFlags(t *testing.T) {
	dir := smallModel(t, "llama")
	code, _, stderr := run("bench", "-model", dir, "-workload", "nope", "-quiet")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "unknown workload")
	code, _, stderr = run("bench", "-model", dir, "-suffix-min", "9", "-suffix-max", "3", "-quiet")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "suffix")
}

func TestGenerateSamplesMatchSeeds(t *testing.T) {
	dir := smallModel(t, "qwen3")
	gen := func(args ...string) (out struct {
		Tokens  []int32   `json:"tokens"`
		Samples [][]int32 `json:"samples"`
	}) {
		code, stdout, stderr := run(append([]string{"generate", "-model", dir, "-prompt", "4,5,6,7,8", "-max-tokens", "5",
			"-ignore-eos", "-temperature", "1.2"}, args...)...)
		require.Equal(t, 0, code, stderr)
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		return out
	}
	forked := gen("-n", "3", "-seed", "10")
	require.Len(t, forked.Samples, 3)
	for i, s := range forked.Samples {
		alone := gen("-seed", fmt.Sprint(10+i))
		assert.Equal(t, alone.Tokens, s, "sample %d", i)
	}
}

func TestProgressBarOnlyOnATerminal(t *testing.T) {
	dir := smallModel(t, "llama")
	code, _, stderr := run("bench", "-model", dir, "-requests", "3", "-prefix-len", "16", "-min-tokens", "2", "-max-tokens", "3", "-rps", "1000")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "\r", "no carriage returns when stderr is not a terminal")
	assert.Contains(t, stderr, "[1/1] testcmd: prefix_caching, 3 requests\n")

	f, err := os.CreateTemp(t.TempDir(), "log")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f), "a file is not a terminal")
	assert.False(t, IsTerminal(&bytes.Buffer{}))
}

// Every subcommand, and phase08's Compare, answers -h with its usage on
// stderr and exit code 0, under its own name.
func TestHelpOnEverySubcommand(t *testing.T) {
	v := Variant{Name: "phase08_prefix", Summary: "test", PrefixCache: nil}
	for name := range commands {
		var stdout, stderr bytes.Buffer
		code := Main(v, []string{name, "-h"}, &stdout, &stderr)
		if code != 0 || !strings.Contains(stderr.String(), "Usage of phase08_prefix "+name) || stdout.Len() != 0 {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", name, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	code := Compare(nil, []string{"-h"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "Usage: phase08 [flags]") || strings.Contains(stderr.String(), "Usage of compare") || stdout.Len() != 0 {
		t.Errorf("phase08 -h: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// bench's -max-tokens means what generate's does: every request asks for
// that many tokens.
func TestBenchMaxTokensSetsTheOutputRange(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var sf servingFlags
	sf.register(fs, nil, "")
	if err := fs.Parse([]string{"-max-tokens", "7"}); err != nil {
		t.Fatal(err)
	}
	if sf.params.OutputMin != 7 || sf.params.OutputMax != 7 {
		t.Errorf("-max-tokens 7 gave the range [%d, %d]", sf.params.OutputMin, sf.params.OutputMax)
	}
}
