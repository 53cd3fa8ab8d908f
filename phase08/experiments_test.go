package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// runExperiment runs one experiment subcommand on a small model and returns
// its stdout; it fails the test unless the experiment succeeds and writes
// its plot.
func runExperiment(t *testing.T, name string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, model.WriteSynthetic(filepath.Join(dir, "model"), modeltest.Options(model.ArchLlama, 1)))
	plot := filepath.Join(dir, name+".svg")
	var stdout, stderr bytes.Buffer
	args = append([]string{"-model", filepath.Join(dir, "model"), "-clock", "step:50ms", "-audit", "-quiet", "-plot", plot}, args...)
	code := experiments[name](args, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), stdout.String())
	svg, err := os.ReadFile(plot)
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	return stdout.String()
}

// tableRow returns the numbers of the row of out whose first field is key.
func tableRow(t *testing.T, out, key string) []int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != key {
			continue
		}
		var n []int
		for _, x := range f[1:4] {
			v, err := strconv.Atoi(x)
			require.NoError(t, err, "row %q", line)
			n = append(n, v)
		}
		return n
	}
	t.Fatalf("no row %s in:\n%s", key, out)
	return nil
}

func TestAlignmentExperiment(t *testing.T) {
	// Four requests share a 10-token prefix, two whole blocks of 4 and
	// half a block: each of the three later requests can reuse 10 tokens
	// at block size 1, 8 at block size 4.
	out := runExperiment(t, "align", "-block-sizes", "1,4", "-requests", "4", "-prefix-len", "10",
		"-suffix-min", "3", "-suffix-max", "6", "-min-tokens", "2", "-max-tokens", "3", "-rps", "2")
	one, four := tableRow(t, out, "1"), tableRow(t, out, "4")
	// Columns: prefill, block-aligned optimum, token-level optimum.
	assert.Equal(t, one[0], one[1], "block size 1 reaches its optimum")
	assert.Equal(t, one[1], one[2], "at block size 1 the two optima agree")
	assert.Equal(t, four[0], four[1], "block size 4 reaches its block-aligned optimum")
	assert.Equal(t, one[2], four[2], "the token-level optimum does not depend on the block size")
	assert.Equal(t, 3*2, four[1]-four[2], "three requests lose the prefix's last 2 tokens each")
	assert.Contains(t, out, "computed the same prompt tokens")
}

func TestPressureExperiment(t *testing.T) {
	out := runExperiment(t, "pressure", "-requests", "12", "-prefix-len", "16", "-suffix-min", "2", "-suffix-max", "4",
		"-min-tokens", "2", "-max-tokens", "3", "-block-size", "4", "-blocks", "24", "-roomy-blocks", "256")
	for _, v := range PolicyVariants {
		assert.Contains(t, out, v.Name)
	}
	assert.Contains(t, out, "no pressure")
	assert.Contains(t, out, "generated exactly the first one's tokens for all 12 requests")
}

func TestOrderExperiment(t *testing.T) {
	out := runExperiment(t, "order", "-requests", "12", "-prefix-len", "16", "-suffix-min", "2", "-suffix-max", "4",
		"-min-tokens", "2", "-max-tokens", "3", "-block-size", "4", "-blocks", "32", "-guard", "3")
	for _, name := range []string{"first come first served", "longest prefix first", "longest prefix first, guard 3 steps"} {
		assert.Contains(t, out, name)
	}
	assert.Contains(t, out, "generated exactly the same tokens for all 12 requests")
}
