// Package workload generates serving workloads and replays them against an
// engine in open loop.
//
// A workload is a list of Requests with arrival times fixed in advance from a
// seed, so two engines (or one engine with and without a feature) see exactly
// the same traffic. Prompts are token ids drawn from a vocabulary of size
// Params.Vocab; there is no tokenizer and no text.
//
// Run drives an Engine: it submits each request when its arrival time comes,
// whether or not the engine has kept up, steps the engine and records every
// token's timestamp into a metrics.Run. Open loop matters: a closed-loop
// client that waits for the engine hides overload, because a slow engine then
// simply receives less traffic.
package workload
