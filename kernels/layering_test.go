package kernels_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelsImportNothingAbove keeps the layering one way: the compute
// ops know nothing of the engine, the model or the server, so that a
// learner can read kernels/ alone. Programs that drive the engine with the
// CPU kernels (the benchmarks) live in cmd/.
func TestKernelsImportNothingAbove(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	out, err := exec.Command("go", "list", "-deps", "-test", "kvlab/kernels/...").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		assert.False(t, strings.HasPrefix(pkg, "kvlab/common/") || strings.HasPrefix(pkg, "kvlab/phase"),
			"kernels/ depends on %s", pkg)
	}
}
