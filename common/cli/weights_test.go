package cli

import (
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// TestServePrintsTheLoadLine checks the line serve prints before it
// listens: the load's time, the mapped weights (or that they were read),
// the resident memory and the CPU kernel set, for each way of loading.
func TestServePrintsTheLoadLine(t *testing.T) {
	dir := smallModel(t, "qwen3")
	for _, tc := range []struct {
		flags []string
		where string
	}{
		{nil, `[0-9.]+ (kB|MB|bytes) of weights mapped\)`},
		{[]string{"-no-mmap"}, `weights read into memory\)`},
		{[]string{"-mlock"}, `[0-9.]+ (kB|MB|bytes) of weights mapped and locked\)`},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			if !slices.Contains(tc.flags, "-no-mmap") && runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
				t.Skip("weights are mapped only on Linux and macOS")
			}
			if slices.Contains(tc.flags, "-mlock") {
				if code, _, stderr := run("generate", "-model", dir, "-prompt", "1", "-max-tokens", "1", "-mlock"); code != 0 {
					require.Contains(t, stderr, "RLIMIT_MEMLOCK")
					t.Skipf("this machine cannot lock the model: %s", stderr)
				}
			}
			url, stop, res, log := startServe(t, Variant{Name: "test"}, append([]string{"-model", dir}, tc.flags...)...)
			completion(t, url, `{"prompt": [1, 2, 3], "max_tokens": 2}`)
			stop()
			require.NoError(t, <-res)
			lines := strings.Split(log.String(), "\n")
			require.GreaterOrEqual(t, len(lines), 2, log.String())
			load := regexp.MustCompile(`^test serve: model loaded in [0-9.]+ s \(` + tc.where + `; (RSS [0-9.]+ (MB|GB|bytes)|RSS unknown).*; CPU kernels ` + cpu.KernelSet() + `$`)
			i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "listening on") })
			require.Positive(t, i, log.String())
			assert.Regexp(t, load, lines[i-1], "the load line comes just before the listening line")
		})
	}
}

func TestMlockAndNoMmapExcludeEachOther(t *testing.T) {
	dir := smallModel(t, "llama")
	code, stdout, stderr := run("generate", "-model", dir, "-prompt", "1,2", "-mlock", "-no-mmap")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "-mlock")
	assert.Contains(t, stderr, "-no-mmap")
	assert.Empty(t, stdout)
}
