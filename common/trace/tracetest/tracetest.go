// Package tracetest holds the checks every prefix-cache design runs on the
// worked example of docs/phase08_trace.md: its trace against a committed
// golden, the moment a commit makes a prefix findable, and its figure
// sequence against the SVG the doc shows.
package tracetest

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/trace"
)

// Cache builds a design's prefix cache, as engine.Config.PrefixCache does.
type Cache = func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache

// Run runs the worked example with cache on m, tracing into a writer that
// also records the figure, and returns the writer and the trace text,
// structure dumps included.
func Run(t *testing.T, m *model.Model, cache Cache, commit engine.CommitPolicy) (*trace.Writer, string) {
	t.Helper()
	var buf bytes.Buffer
	cfg := trace.WorkedExampleConfig()
	cfg.PrefixCache = cache
	cfg.Commit = commit
	tw := trace.New(&buf, true)
	tw.Record()
	cfg.Trace = tw
	e, err := engine.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := trace.RunWorkedExample(e, &buf); err != nil {
		t.Fatal(err)
	}
	return tw, buf.String()
}

// Golden checks that the worked example's trace on a small test model is
// exactly the file at path, so a change in what the design caches, lends,
// evicts or copies — or in how it draws itself — shows up as a diff. With
// update it rewrites the file first.
func Golden(t *testing.T, cache Cache, path string, update bool) {
	t.Helper()
	_, got := Run(t, modeltest.Load(t, model.ArchLlama, 8), cache, engine.CommitEveryChunk)
	same(t, []byte(got), path, update, true)
}

// CommitMoment checks the example's second request: it arrives while the
// first is still prefilling, so with per-chunk commits it finds the system
// prompt the first chunk committed, and with prompt-end commits it finds
// nothing and computes it again.
func CommitMoment(t *testing.T, cache Cache) {
	t.Helper()
	m := modeltest.Load(t, model.ArchLlama, 8)
	const chunk, promptEnd = "match   r2: 8 of 13 prompt tokens cached", "match   r2: 0 of 13 prompt tokens cached"
	if _, got := Run(t, m, cache, engine.CommitEveryChunk); !strings.Contains(got, chunk) {
		t.Errorf("per-chunk commit: no %q in the trace:\n%s", chunk, got)
	}
	if _, got := Run(t, m, cache, engine.CommitPromptEnd); !strings.Contains(got, promptEnd) {
		t.Errorf("prompt-end commit: no %q in the trace:\n%s", promptEnd, got)
	}
}

// Figure checks that the figure sequence the worked example draws on the
// built-in model (the one trace-example runs) is exactly the SVG at path,
// which docs/phase08_trace.md shows. With update it rewrites the file
// first.
func Figure(t *testing.T, cache Cache, title, path string, update bool) {
	t.Helper()
	tw, _ := Run(t, modeltest.LoadOptions(t, model.Builtin()), cache, engine.CommitEveryChunk)
	same(t, tw.Figure(title), path, update, false)
}

// same fails t unless got is the content of the file at path, after
// writing it there when update is set; show prints got on a mismatch.
func same(t *testing.T, got []byte, path string, update, show bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		msg := "%s differs from what the code produces now (rerun the test with -update if the change is intended)"
		if show {
			msg += ":\n" + string(got)
		}
		t.Errorf(msg, path)
	}
}
