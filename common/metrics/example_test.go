package metrics_test

import (
	"os"
	"time"

	"kvlab/common/metrics"
)

func Example() {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	run := &metrics.Run{
		Name: "prefix-cache",
		Wall: 2 * time.Second,
		Requests: []metrics.RequestRecord{
			{ID: 0, PromptLen: 1100, CachedTokens: 0, OutputLen: 3, Arrival: 0,
				FirstToken: ms(400), Finish: ms(440), TokenTimes: []time.Duration{ms(400), ms(420), ms(440)}},
			{ID: 1, PromptLen: 1100, CachedTokens: 1024, OutputLen: 2, Arrival: ms(125),
				FirstToken: ms(225), Finish: ms(250), TokenTimes: []time.Duration{ms(225), ms(250)}},
		},
		Engine: metrics.EngineStats{PrefillTokensComputed: 1176},
	}
	metrics.WriteTable(os.Stdout, []metrics.Summary{run.Summary()})
	// Output:
	// name          failed  TTFT p50 ms  TTFT p99 ms  ITL p50 ms  out tok/s  prefill tok  of optimum %  hit %
	// prefix-cache       0        100.0        400.0        20.0        2.5         1176             -   46.5
}
