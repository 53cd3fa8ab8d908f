package metrics

import (
	"encoding/json"
	"fmt"
	"io"
)

// jsonRun is one element of the JSON document: the run's own fields with its
// summary alongside, so a reader need not recompute percentiles.
type jsonRun struct {
	*Run
	Summary Summary `json:"summary"`
}

// WriteJSON writes runs as an indented JSON array. Each element has the Run's
// fields (name, wall_ns, engine, requests) plus "summary". Durations are
// integer nanoseconds, named with an _ns suffix.
func WriteJSON(w io.Writer, runs []*Run) error {
	out := make([]jsonRun, len(runs))
	for i, r := range runs {
		if r == nil {
			return fmt.Errorf("metrics: write JSON: run %d is nil", i)
		}
		out[i] = jsonRun{Run: r, Summary: r.Summary()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("metrics: write JSON: %w", err)
	}
	return nil
}

// ReadJSON reads what WriteJSON wrote. Summaries are dropped: they are
// derived data, and Run.Summary recomputes them.
func ReadJSON(r io.Reader) ([]*Run, error) {
	var in []jsonRun
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return nil, fmt.Errorf("metrics: read JSON: %w", err)
	}
	runs := make([]*Run, len(in))
	for i, j := range in {
		if j.Run == nil {
			j.Run = &Run{}
		}
		runs[i] = j.Run
	}
	return runs, nil
}
