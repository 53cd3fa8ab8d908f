package main

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// TestCompareRunsAllVariants runs the experiment end to end on a small
// model and a small workload: four rows, identical outputs, three plots.
func TestCompareRunsAllVariants(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, model.WriteSynthetic(filepath.Join(dir, "model"), modeltest.Options(model.ArchLlama, 1)))

	for _, w := range []string{"prefix_caching", "multi_turn", "no_shared_prefix"} {
		t.Run(w, func(t *testing.T) {
			plot := filepath.Join(dir, w+".svg")
			var stdout, stderr bytes.Buffer
			code := cli.Compare(Variants, []string{"-model", filepath.Join(dir, "model"), "-workload", w,
				"-requests", "6", "-prefix-len", "40", "-suffix-min", "3", "-suffix-max", "9",
				"-min-tokens", "2", "-max-tokens", "4", "-rps", "500", "-conversations", "2", "-turns", "3", "-think", "0s",
				"-block-size", "4", "-audit", "-plot", plot, "-quiet"}, &stdout, &stderr)
			require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), stdout.String())

			out := stdout.String()
			for _, name := range append([]string{"baseline"}, names()...) {
				assert.Contains(t, out, name)
			}
			assert.Contains(t, out, "generated exactly the baseline's tokens")
			for _, suffix := range []string{".svg", "-cdf.svg", "-prefill.svg"} {
				path := strings.TrimSuffix(plot, ".svg") + suffix
				svg, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Contains(t, out, path)
				for _, name := range append([]string{"baseline"}, names()...) {
					assert.Contains(t, string(svg), ">"+html.EscapeString(name)+"<", "%s names every configuration", path)
				}
			}
		})
	}
}

func names() []string {
	var n []string
	for _, v := range Variants {
		n = append(n, v.Name)
	}
	return n
}
