package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
)

func testSettings(serveArgs, llamaArgs []string) settings {
	return settings{bin: "bin/phase08_prefix", llamaServer: "llama.cpp/llama-server", threads: 2, ctx: 16384, slots: 8,
		serveArgs: serveArgs, llamaArgs: llamaArgs}
}

var testModel = &prepared{dir: "work/m", gguf: "work/m/model.gguf"}

// TestDefaultRowsAsShipped pins every argument the default rows' servers
// get: a flag added to either fails here, and must be argued for in
// defaults.go (sizing or the same work) or go into a tuned row.
func TestDefaultRowsAsShipped(t *testing.T) {
	st := testSettings([]string{"-bf16-dot=false"}, []string{"--swa-full"})
	sides := st.sides()
	require.Len(t, sides, 4)

	serve := sides[0]
	assert.Equal(t, "serve", serve.name)
	assert.False(t, serve.tuned())
	assert.Equal(t, []string{"bin/phase08_prefix", "serve", "-model", "work/m", "-prefix-caching", "-blocks", "1024",
		"-host", "127.0.0.1", "-port", "9000"}, serve.argv(testModel, 9000))

	llama := sides[1]
	assert.Equal(t, "llama-server", llama.name)
	assert.False(t, llama.tuned())
	assert.Equal(t, []string{"llama.cpp/llama-server", "-m", "work/m/model.gguf", "-t", "2", "-tb", "2", "-c", "16384", "-kvu", "-np", "8",
		"--host", "127.0.0.1", "--port", "9000"}, llama.argv(testModel, 9000))
	assert.Equal(t, []string{"llama.cpp/llama-server", "-m", "work/m/model.gguf", "-t", "2", "-tb", "2", "-c", "16384", "-kvu", "-np", "8"},
		llama.argv(testModel, -1), "benchstartup's command: no port")
}

// TestTunedRows: extra arguments make rows of their own, labelled with
// them, the default flags then the extra ones; they never reach a
// default row, and without them there are no tuned rows.
func TestTunedRows(t *testing.T) {
	st := testSettings([]string{"-bf16-dot=false", "-kv-cache-dtype", "f16"}, []string{"--swa-full"})
	sides := st.sides()
	require.Len(t, sides, 4)
	serveTuned, llamaTuned := sides[2], sides[3]
	assert.Equal(t, "serve -bf16-dot=false -kv-cache-dtype f16", serveTuned.name)
	assert.True(t, serveTuned.tuned())
	assert.Equal(t, serverServe, serveTuned.server)
	assert.Equal(t, []string{"bin/phase08_prefix", "serve", "-model", "work/m", "-prefix-caching", "-blocks", "1024",
		"-bf16-dot=false", "-kv-cache-dtype", "f16"}, serveTuned.argv(testModel, -1))
	assert.Equal(t, "llama-server --swa-full", llamaTuned.name)
	assert.Equal(t, serverLlama, llamaTuned.server)
	assert.Equal(t, "--swa-full", llamaTuned.argv(testModel, -1)[len(llamaTuned.argv(testModel, -1))-1])
	for _, sd := range sides[:2] {
		argv := strings.Join(sd.argv(testModel, 1), " ")
		assert.NotContains(t, argv, "bf16-dot", sd.name)
		assert.NotContains(t, argv, "swa-full", sd.name)
	}

	alone := testSettings(nil, nil)
	alone.llamaServer = ""
	require.Len(t, alone.sides(), 1, "serve alone, no tuned row")
	alone.serveArgs = []string{"-bf16-dot"}
	alone.llamaArgs = []string{"--swa-full"}
	var names []string
	for _, sd := range alone.sides() {
		names = append(names, sd.name)
	}
	assert.Equal(t, []string{"serve", "serve -bf16-dot"}, names, "no llama-server row without llama-server")
}

// TestDescribeDefaults: the markdown lists every default flag of both
// servers, with its reason, and says which rows are tuned only when
// there are some.
func TestDescribeDefaults(t *testing.T) {
	st := testSettings(nil, nil)
	d := st.describeDefaults()
	for _, f := range append(st.serveDefaults(), st.llamaDefaults()...) {
		assert.Contains(t, d, "`"+strings.Join(f.flag, " ")+"` ("+f.why+")")
	}
	assert.Contains(t, d, "`GOMAXPROCS=2`")
	assert.NotContains(t, d, "tuned")
	st.serveArgs = []string{"-bf16-dot=false"}
	assert.Contains(t, st.describeDefaults(), "is tuned")
}

func TestLogName(t *testing.T) {
	assert.Equal(t, "serve_-kv-cache-dtype_f16", logName("serve -kv-cache-dtype f16"))
	assert.Equal(t, "llama-server_--cache-reuse_256", logName("llama-server --cache-reuse 256"))
	assert.Equal(t, "serve_-x_a_b", logName("serve -x a/b"))
}

// TestServingTableRows: the serving table has a row per server row and
// run, labelled by both, and computes the prefill tokens from the
// summaries.
func TestServingTableRows(t *testing.T) {
	st := testSettings([]string{"-bf16-dot=false"}, nil)
	st.llamaServer = ""
	o := options{requests: 4, concurrency: 2, systems: 1, systemLen: 8, suffixMin: 1, suffixMax: 2, output: 3, hogs: 2}
	r := &result{m: &prepared{shape: shape{name: "m"}}, s: map[string]*sample{}}
	for i, sd := range st.sides() {
		r.sides = append(r.sides, sd)
		smp := &sample{serving: map[servingRun][]metrics.Summary{}}
		for j, k := range servingRuns(o.hogs) {
			smp.serving[k] = []metrics.Summary{{PromptTokens: 100, CachedTokens: 10 * (i + j), OutputTokensPerSec: 5}}
		}
		r.s[sd.name] = smp
	}
	var rows []string
	for _, line := range strings.Split(servingTable([]*result{r}, o), "\n") {
		if strings.HasPrefix(line, "| m ") {
			rows = append(rows, strings.Join(strings.Fields(strings.ReplaceAll(line, "|", " ")), " "))
		}
	}
	assert.Equal(t, []string{
		"m serve shared prefix 5.00 0 / 0 0 100 of 100 0",
		"m serve no shared prefix 5.00 0 / 0 0 90 of 100 10",
		"m serve shared prefix, under load (2 hogs) 5.00 0 / 0 0 80 of 100 20",
		"m serve no shared prefix, under load (2 hogs) 5.00 0 / 0 0 70 of 100 30",
		"m serve -bf16-dot=false shared prefix 5.00 0 / 0 0 90 of 100 10",
		"m serve -bf16-dot=false no shared prefix 5.00 0 / 0 0 80 of 100 20",
		"m serve -bf16-dot=false shared prefix, under load (2 hogs) 5.00 0 / 0 0 70 of 100 30",
		"m serve -bf16-dot=false no shared prefix, under load (2 hogs) 5.00 0 / 0 0 60 of 100 40",
	}, rows)
	assert.Contains(t, servingTable([]*result{r}, o), "4 requests over 1 system prompt of 8 tokens")
	o.systems = 3
	assert.Contains(t, servingTable([]*result{r}, o), "4 requests over 3 system prompts of 8 tokens")
}
