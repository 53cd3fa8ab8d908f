package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/trace"
	"kvlab/phase08_hashcow/blockhash"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the code prints now")

// runTraceExample runs the worked example of docs/phase08_trace.md on this
// design and returns its trace, structure dumps included.
func runTraceExample(t *testing.T, commit engine.CommitPolicy) string {
	t.Helper()
	var buf bytes.Buffer
	cfg := trace.WorkedExampleConfig()
	cfg.PrefixCache = blockhash.PrefixCache
	cfg.Commit = commit
	cfg.Trace = trace.New(&buf, true)
	e, err := engine.New(modeltest.Load(t, model.ArchLlama, 8), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := trace.RunWorkedExample(e, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestTraceGolden: the worked example's trace is exactly the committed
// golden, so a change in what the design caches, lends, evicts or copies —
// or in how it draws itself — shows up as a diff. go test -run
// TestTraceGolden -update rewrites it.
func TestTraceGolden(t *testing.T) {
	got := runTraceExample(t, engine.CommitEveryChunk)
	path := filepath.Join("testdata", "trace.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("trace differs from %s (rerun with -update if the change is intended):\n%s", path, got)
	}
}

// TestTraceCommitMoment: r2 arrives while r1 is still prefilling. With
// per-chunk commits it finds the system prompt r1's first chunk committed;
// with prompt-end commits it finds nothing and computes it again.
func TestTraceCommitMoment(t *testing.T) {
	const chunk, promptEnd = "match   r2: 8 of 13 prompt tokens cached", "match   r2: 0 of 13 prompt tokens cached"
	if got := runTraceExample(t, engine.CommitEveryChunk); !strings.Contains(got, chunk) {
		t.Errorf("per-chunk commit: no %q in the trace:\n%s", chunk, got)
	}
	if got := runTraceExample(t, engine.CommitPromptEnd); !strings.Contains(got, promptEnd) {
		t.Errorf("prompt-end commit: no %q in the trace:\n%s", promptEnd, got)
	}
}

// TestTraceFigure: docs/img/phase08-trace-hashcow.svg, the figure sequence
// docs/phase08_trace.md shows, is exactly what the worked example draws on
// the built-in model (the one trace-example runs). -update rewrites it.
func TestTraceFigure(t *testing.T) {
	var buf bytes.Buffer
	cfg := trace.WorkedExampleConfig()
	cfg.PrefixCache = blockhash.PrefixCache
	tw := trace.New(&buf, true)
	tw.Record()
	cfg.Trace = tw
	e, err := engine.New(modeltest.LoadOptions(t, model.Builtin()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := trace.RunWorkedExample(e, &buf); err != nil {
		t.Fatal(err)
	}
	got := tw.Figure("phase08_hashcow: the worked example, step by step")
	path := filepath.Join("..", "docs", "img", "phase08-trace-hashcow.svg")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the figure the code draws now (rerun with -update if the change is intended)", path)
	}
}
