// Package metrics records what happened to every request of a serving run and
// turns it into the numbers a serving engine is judged by: time to first token
// (TTFT), inter-token latency (ITL), end-to-end latency, throughput and prefix
// cache hit rate.
//
// A Run holds raw per-request records; Summary reduces them. WriteTable prints
// summaries side by side (WriteWideTable with every column), WriteJSON keeps
// everything for later analysis, and three self-contained SVG plots compare
// runs: WriteTTFTPlot draws TTFT per request, WriteTTFTCDF the distribution
// of TTFT, and WritePrefillPlot the prompt tokens each run computed against
// the block-aligned optimum.
//
// All times are durations since the start of the run, so runs taken at
// different moments compare directly.
package metrics
