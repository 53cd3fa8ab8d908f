package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// tierRow is one configuration's numbers as the table prints them.
type tierRow struct {
	hit                float64
	prefill            int
	ramBlk, diskBlk    int // -1: the row has no such tier
	skip               int // -1: the row has no tier
	p50, p99, vsRefPct float64
}

var columns = regexp.MustCompile(`\s{2,}`)

// tableRows parses the experiment's table: name → numbers.
func tableRows(t *testing.T, out string) map[string]tierRow {
	t.Helper()
	lines := strings.Split(out, "\n")
	rows := map[string]tierRow{}
	num := func(s string) float64 {
		if s == "-" {
			return -1
		}
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err, "%q in:\n%s", s, out)
		return v
	}
	for _, l := range lines[1:] {
		f := columns.Split(strings.TrimSpace(l), -1)
		if len(f) != 12 {
			break
		}
		rows[f[0]] = tierRow{hit: num(f[1]), prefill: int(num(f[2])), vsRefPct: num(f[3]), p50: num(f[4]), p99: num(f[5]),
			ramBlk: int(num(f[6])), diskBlk: int(num(f[7])), skip: int(num(f[11]))}
	}
	require.NotEmpty(t, rows, "no table in:\n%s", out)
	return rows
}

// heavyRows is a small model whose prompt rows cost far more to compute
// than a block of its KV costs to copy (one wide layer of one KV head), so
// that the cost rule, which weighs the two as this machine measures them,
// keeps promoting even through a slow moment.
func heavyRows() model.SynthOptions {
	o := modeltest.Options(model.ArchLlama, 1)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 300, 384, 1536, 1
	o.Heads, o.KVHeads, o.HeadDim = 6, 1, 64
	return o
}

// TestTiersExperimentClaims runs a small version of the experiment (16
// conversations of three turns on a pool of about three of them, a step
// budget of 32 tokens) for every design and checks what the lesson reads
// from the table: every configuration generated the unbounded pool's
// tokens; the small pool without a tier computes more prompt tokens than
// the unbounded one; every tier computes fewer than no tier, and promotes
// blocks from the tier it has; a RAM tier big enough for the workload
// comes within 10 % of the unbounded pool's prefill and reaches its hit
// rate, and cuts TTFT. A row whose cost rule skipped promotions (it weighs
// measured times, which a loaded machine can spoil) is held only to
// computing no more than the row without a tier.
func TestTiersExperimentClaims(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, heavyRows()))
	plot := filepath.Join(t.TempDir(), "tiers.svg")
	args := []string{"-model", dir, "-clock", "step:50ms", "-audit", "-quiet", "-plot", plot, "-design", "all",
		"-conversations", "16", "-turns", "3", "-prefix-len", "32", "-suffix-min", "8", "-suffix-max", "16",
		"-min-tokens", "4", "-max-tokens", "8", "-rps", "4", "-block-size", "4", "-blocks", "48", "-max-batch-tokens", "32",
		"-roomy-blocks", "1024", "-ram-blocks", "1024", "-small-ram-blocks", "24", "-disk-blocks", "1024"}
	var stdout, stderr bytes.Buffer
	code := cli.Tiers(Designs, args, &stdout, &stderr)
	out := stdout.String()
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), out)
	t.Log("\n" + out)
	svg, err := os.ReadFile(plot)
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	assert.Contains(t, out, "outputs: every configuration of this engine generated exactly the radix, unbounded pool's tokens for all 48 requests")
	assert.Contains(t, out, "llama-server rows left out")

	rows := tableRows(t, out)
	ref := rows["radix, unbounded pool"]
	require.Positive(t, ref.prefill)
	for _, d := range Designs {
		name := func(s string) string { return d.Flag + ", " + s }
		none, ram := rows[name("no tier")], rows[name("RAM")]
		require.Contains(t, rows, name("no tier"))
		assert.Greater(t, none.prefill, ref.prefill, "%s: the small pool computes prompt tokens again", d.Flag)
		assert.Equal(t, -1, none.skip, "%s: no tier, no tier columns", d.Flag)
		for _, tier := range []string{"RAM", "RAM over disk", "disk"} {
			r, ok := rows[name(tier)]
			require.True(t, ok, "no row %s", name(tier))
			if r.skip > 0 {
				t.Logf("%s: the cost rule skipped %d promotions (measured times): held only to no more prefill than no tier", name(tier), r.skip)
				assert.LessOrEqual(t, r.prefill, none.prefill, name(tier))
				continue
			}
			assert.Less(t, r.prefill, none.prefill, "%s computes less than no tier", name(tier))
			if tier != "disk" {
				assert.Positive(t, r.ramBlk, "%s: blocks come back from RAM", name(tier))
			}
			if tier != "RAM" {
				assert.Positive(t, r.diskBlk, "%s: blocks come back from the disk", name(tier))
			}
		}
		if ram.skip == 0 {
			assert.LessOrEqual(t, float64(ram.prefill), 1.1*float64(ref.prefill), "%s: a RAM tier for the whole workload is within 10%% of the unbounded pool", d.Flag)
			assert.Equal(t, ref.hit, ram.hit, "%s: and finds what the unbounded pool finds", d.Flag)
			assert.Less(t, ram.p99, none.p99, "%s: computing less, its slowest first tokens come sooner", d.Flag)
		}
		assert.Equal(t, -1, ram.diskBlk, "%s: the RAM row has no disk", d.Flag)
	}
}

// TestTiersLlamaServerRows runs the small experiment with llama-server's
// rows when LLAMA_CPP_DIR names a llama.cpp build (it is skipped
// otherwise): both rows come back, every request answered, and the one
// with a host-memory cache reuses prompt tokens.
func TestTiersLlamaServerRows(t *testing.T) {
	build := os.Getenv("LLAMA_CPP_DIR")
	if build == "" {
		t.Skip("LLAMA_CPP_DIR is not set: no llama.cpp build to run llama-server from")
	}
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, heavyRows()))
	args := []string{"-model", dir, "-clock", "step:50ms", "-quiet", "-plot", "", "-llama-cpp", build,
		"-conversations", "16", "-turns", "3", "-prefix-len", "32", "-suffix-min", "8", "-suffix-max", "16",
		"-min-tokens", "4", "-max-tokens", "8", "-rps", "4", "-block-size", "4", "-blocks", "48", "-max-batch-tokens", "32",
		"-roomy-blocks", "1024", "-ram-blocks", "1024", "-small-ram-blocks", "24", "-disk-blocks", "1024"}
	var stdout, stderr bytes.Buffer
	code := cli.Tiers(Designs, args, &stdout, &stderr)
	out := stdout.String()
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), out)
	t.Log("\n" + out)
	rows := tableRows(t, out)
	off, ok := rows["llama-server RAM 0 MiB"]
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 120, "%q", l)
	}
	require.True(t, ok, "no llama-server row without its cache in:\n%s", out)
	var on tierRow
	for name, r := range rows {
		if strings.HasPrefix(name, "llama-server RAM ") && name != "llama-server RAM 0 MiB" {
			on, ok = r, true
		}
	}
	require.True(t, ok, "no llama-server row with its cache in:\n%s", out)
	assert.Positive(t, on.hit, "llama-server's host-memory cache reuses prompt tokens")
	assert.Positive(t, off.prefill)
	assert.NotContains(t, out, "llama-server rows left out")
}
