// Package metrics records what happened to every request of a serving run and
// turns it into the numbers a serving engine is judged by: time to first token
// (TTFT), inter-token latency (ITL), end-to-end latency, throughput and prefix
// cache hit rate.
//
// A Run holds raw per-request records; Summary reduces them. WriteTable prints
// summaries side by side, WriteJSON keeps everything for later analysis and
// WriteTTFTPlot draws TTFT per request as a self-contained SVG.
//
// All times are durations since the start of the run, so runs taken at
// different moments compare directly.
package metrics
