// Package benchrun holds what the CPU backend's two side-by-side
// benchmarks (cmd/benchcpu against llama.cpp, cmd/benchdecode
// against llama2.c) share: timing one request through the engine, the
// median they report, and their -cpuprofile flag.
package benchrun

import (
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"kvlab/common/engine"
)

// Run submits r alone to e, steps e until it is idle, and returns r's
// tokens and when the first and the last came out.
func Run(e *engine.Engine, r engine.Request) (out []int32, first, last time.Time, err error) {
	if err := e.Submit(r); err != nil {
		return nil, first, last, err
	}
	for e.Busy() {
		for _, o := range e.Step() {
			if o.Err != nil {
				return nil, first, last, o.Err
			}
			now := time.Now()
			if len(out) == 0 {
				first = now
			}
			last = now
			out = append(out, o.Token)
		}
	}
	return out, first, last, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count), leaving xs as it is.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// StartCPUProfile starts a CPU profile of the whole run into the file at
// path and returns the function that stops it; an empty path profiles
// nothing.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
